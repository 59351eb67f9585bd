"""How a trainer's process starts and ends: ``launch`` (its ``__main__``: flags or --resume, then ``main``, Ctrl-C
before the run as one line), ``start_process`` (seeds, torch's threads, the device) and ``finish`` (the exit,
without the interpreter's last full garbage collection)."""

import atexit
import gc
import os
import random
import sys
from typing import Any, Callable, NoReturn

import numpy as np
import torch

from rlfast.algos.config import parse_or_resume
from rlfast.algos import distributed
from rlfast.algos.distributed import World
from rlfast.algos.runargs import flushes_denormals
from rlfast.algos.signals import Interrupts, caused_by_interrupt
from rlfast.algos.speed import denormals_flushed, flush_denormals, native_bf16


def launch(main: Callable[..., int], args_type: type, script: str) -> NoReturn:
    """A trainer's ``__main__``: ``main(*parse_or_resume(args_type, script))``, then ``finish`` with its exit code.
    Ctrl-C before the run has started (parsing, building the envs) or while ``with run:`` writes its last
    checkpoint (a second Ctrl-C) ends the process with one line and status 130 (143 for SIGTERM): checkpoints are
    written atomically, so the run dir keeps the last one that was complete. So does another exception raised from
    the KeyboardInterrupt (``signals.caused_by_interrupt``: an import it cut short)."""
    interrupts = Interrupts()  # also SIGTERM, and a Ctrl-C inside an import comes just after it (signals.py)
    interrupts.catch()
    try:
        code = main(*parse_or_resume(args_type, script))
    except (KeyboardInterrupt, Exception) as e:
        if not caused_by_interrupt(e):
            raise
        print("\ninterrupted: no checkpoint written now (the run dir keeps the last complete one, if any)",
              file=sys.stderr, flush=True)  # fmt: skip
        code = 128 + interrupts.signum
    finally:
        interrupts.restore()
    finish(code)


def finish(exit_code: int) -> NoReturn:
    """Ends a trainer's process with ``exit_code`` without the interpreter's last full garbage collection.

    With torch loaded that collection takes seconds and frees nothing a process that is ending needs: it was
    ~3 s of the ~3.7 s between a CartPole ``ppo.py`` run's last line and its exit on the 2-core machine (both
    cores busy with other work). ``gc.freeze()`` takes every object out of its reach; everything that must reach
    disk (checkpoints, the run log) is closed before ``main`` returns, and atexit handlers still run.

    Under torchrun the interpreter is not finalized at all (the atexit handlers run, the streams are flushed, then
    ``os._exit``): gloo's worker threads outlive ``destroy_process_group`` and may still be freeing the tensors of the
    last collectives, which takes the GIL; a thread that takes it while the interpreter finalizes is ended inside a
    C++ destructor, and the rank aborts ("terminate called without an active exception", SIGABRT) after a complete
    run. Seen in 2 of 25 resumed 2-rank runs beside 2 busy loops on the 2-core machine (core dump: gloo's runLoop in
    ~AsyncBarrierWork -> ~AsyncBroadcastWork -> decref_pyobject -> take_gil -> pthread_exit)."""
    gc.freeze()
    if distributed.joined():
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)
    sys.exit(exit_code)


def start_process(args: Any, world: World) -> tuple[torch.device, bool, bool]:
    """Seeds python, numpy and torch with --seed, sets cudnn's determinism, torch's CPU threads (--torch-threads,
    or the rank's share of the cores under torchrun) and denormal flushing (before any of torch's threads starts).
    Returns the device (this rank's GPU under torchrun), whether denormals are flushed, and whether this thread's
    mode must be put back when the run ends."""
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    if args.torch_threads or world.distributed:
        torch.set_num_threads(args.torch_threads or world.cpu_share())
    cuda = torch.cuda.is_available() and args.cuda
    device = torch.device(f"cuda:{world.local_rank}" if cuda and world.distributed else "cuda" if cuda else "cpu")
    if cuda and world.distributed:
        torch.cuda.set_device(device)
    if getattr(args, "bf16", False) and not native_bf16(device) and world.is_main:
        print(f"note: --bf16 on {device.type}, which has no native bfloat16 (AVX512-BF16 / AMX): bfloat16's "
              "numerics in float32 kernels (values rounded to bfloat16), no faster", flush=True)  # fmt: skip
    flush = flushes_denormals(args, device)
    restore = flush and not denormals_flushed()  # this thread's mode, put back at the end
    flushed = flush and flush_denormals()
    if flush and not flushed and world.is_main:
        print("note: --flush-denormals: not every CPU thread of torch's flushes denormals (the CPU lacks "
              "FTZ/DAZ, or the threads started before the run)", flush=True)  # fmt: skip
    return device, flushed, restore
