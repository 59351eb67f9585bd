"""The CPU speed options of the CNN trainers: ``FrameNet``, the layers over uint8 frames that run channels-last,
under a bfloat16 autocast, or with bfloat16's numerics rounded in float32 where the device lacks native bfloat16
(``set_speed`` on a whole model); whether a device has native bfloat16; and denormal flushing (FTZ/DAZ) for
torch's CPU threads. The networks themselves are ``rlfast/algos/nets.py``'s."""

import functools
import os
from typing import Any, Callable, Iterable, Optional, TypeVar

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from rlfast.algos.frame_norm import normalize_rows
from rlfast.algos.normalize import RunningMeanStd


ONEDNN_CAPS_WITHOUT_BF16 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}
"""oneDNN instruction-set caps (``ONEDNN_MAX_CPU_ISA``) below AVX512_CORE_BF16: bf16 is emulated under them"""
ONEDNN_CAPS_WITHOUT_AMX = ONEDNN_CAPS_WITHOUT_BF16 | {"AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX10_1_512",
                                                  "AVX10_2_512"}  # fmt: skip
"""oneDNN instruction-set caps below AVX512_CORE_AMX: bf16 runs without AMX tiles under them"""


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 matmuls and convolutions natively: a CUDA GPU that supports it, or
    a CPU with AVX512-BF16 or AMX (oneDNN's bf16 kernels; elsewhere bf16 is emulated and slower than fp32),
    unless oneDNN is capped below them (``ONEDNN_MAX_CPU_ISA`` / ``DNNL_MAX_CPU_ISA``)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    if _onednn_cap() in ONEDNN_CAPS_WITHOUT_BF16:
        return False
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def auto_bf16(device: torch.device) -> bool:
    """Whether ``--auto-speed`` takes bf16 on ``device``: a CPU whose oneDNN runs bfloat16 on AMX tiles, or an AMD
    CPU with AVX512-BF16 (the demos' bf16 timings; float32 unmeasured there). Not an Intel CPU with AVX512-BF16
    alone: there every CNN trainer ran slower in bf16 than in float32 (docs/performance/cpu.md#bfloat16)."""
    if device.type != "cpu" or not native_bf16(device):
        return False
    if _onednn_cap() not in ONEDNN_CAPS_WITHOUT_AMX and torch.cpu._is_amx_tile_supported():
        return True
    return cpu_vendor() == "AuthenticAMD"


@functools.lru_cache(maxsize=1)
def cpu_vendor() -> str:
    """The CPU's vendor as Linux names it (``GenuineIntel``, ``AuthenticAMD``), "" where /proc/cpuinfo says none."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")), "")
    except OSError:
        return ""


def _onednn_cap() -> str:
    """oneDNN's instruction-set cap as the environment sets it (``ONEDNN_MAX_CPU_ISA`` / ``DNNL_MAX_CPU_ISA``)."""
    return os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "")).upper()


def flush_denormals() -> bool:
    """Turns on flush-to-zero and denormals-are-zero (FTZ/DAZ) for this thread and the threads it starts from
    now on, torch's OpenMP workers among them (a new thread inherits its creator's floating-point state).
    Float32 values below 1.2e-38 then count as 0. They are what Adam's moments decay to where a weight's
    gradient stays 0 (a dead ReLU unit), and there they stay: half of a trained Pong DQN's moments were
    denormal, each costing the CPU a microcode assist (its fused Adam step 21.8 ms against 1.43 ms with them
    flushed, one thread: docs/performance/cpu.md). What is learned does not change: such a moment moves its weight by
    far less than the weight's last bit (``benchmarks/check_flush_denormals.py``: 300 gradient steps from
    that DQN's checkpoint leave every float32 weight bit for bit the same). TensorFlow and XLA on a CPU run
    this way by default.

    Returns whether every thread of torch's pool now flushes: a probe of denormals multiplied across the
    pool comes back all zero. False where the CPU has no FTZ/DAZ, or where the pool's threads were started
    before this call (then only this thread flushes)."""
    if not torch.set_flush_denormal(True):
        return False
    return _flushes(max(torch.get_num_threads(), 1) * 65536)  # split over the pool


def denormals_flushed() -> bool:
    """Whether this thread treats denormals as 0 (``flush_denormals``)."""
    return _flushes(1)


def _flushes(n: int) -> bool:
    tiny = torch.ones(n, dtype=torch.int32).view(torch.float32)  # the smallest denormal, as its bits
    return bool((tiny * 2.0).view(torch.int32).eq(0).all())  # with DAZ each reads as 0


def _count_in_place_steps(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    """After any optimizer's step: bump its parameters' version counters, which fused kernels leave as they
    were (a fused Adam step changes a weight in place without counting it), so that the versions
    ``FrameNet``'s cache of bfloat16 weights is keyed on change with every change of the weights."""
    torch.autograd.graph.increment_version([p for group in optimizer.param_groups for p in group["params"]])


_hook: Optional[object] = None
"""the optimizer step hook, registered by the first FrameNet that runs in bf16 (no other run needs it)"""


def _count_steps_for_bf16() -> None:
    """Registers ``_count_in_place_steps`` once per process, when a FrameNet first runs in bf16."""
    global _hook
    if _hook is None:
        _hook = register_optimizer_step_post_hook(_count_in_place_steps)


class RoundToBF16(torch.autograd.Function):
    """Rounds a float32 tensor to the nearest bfloat16 value, kept in float32, and its gradient the same way:
    what a cast to bfloat16 and back does to a value, and what a bfloat16 kernel's backward does to the
    gradient it returns."""

    @staticmethod
    def forward(ctx, t: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return t.to(torch.bfloat16).to(t.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad.to(torch.bfloat16).to(grad.dtype)


Weights = Optional[tuple[torch.Tensor, Optional[torch.Tensor]]]


def _cast(w: Weights, cast: Callable[[torch.Tensor], torch.Tensor]) -> Weights:
    """A layer's (weight, bias) with ``cast`` applied to each (None stays None)."""
    return None if w is None else tuple(None if t is None else cast(t) for t in w)  # type: ignore[return-value]


class FrameNet(nn.Sequential):
    """``nn.Sequential`` over uint8 frames [N, C, H, W]: scales them to [0, 1] (CleanRL's ``x / 255.0``), runs
    its layers and returns float32. Its state_dict is the plain ``nn.Sequential``'s (``0.weight``, ...), plus
    the per-pixel statistics where it normalizes the frames instead of scaling them (``pixel_stats``, ``normalize``).

    Speed options (``set_speed``), off by default: ``channels_last`` keeps weights and activations NHWC,
    which oneDNN's CPU convolutions run faster (its backward most); ``bf16`` runs the layers in bfloat16
    under ``torch.autocast`` (fast only where ``native_bf16``), the result cast back to float32 so that
    heads, distributions and losses outside stay float32. With ``bf16``:
    - the frames go to bfloat16 as they are (integers 0-255 are exact there) and the first layer's weights
      take the 1 / 255: no float32 copy of the batch and no pass over it to scale it (at 256 frames those
      took longer than the convolutions);
    - a forward pass without autograd (acting, a target network) uses bfloat16 copies of the weights made
      once per change of the weights (their version counters, data pointers and device; every optimizer
      step counts, fused ones included): the autocast would cast every weight at every call, which costs
      more than a small batch's convolutions. Its results equal the autocast's, which casts the same values.
    Layers with parameters must be ``nn.Conv2d`` or ``nn.Linear`` (``set_speed`` checks).

    ``round_bf16`` (with ``bf16``): the bf16 path's numerics on a device without native bfloat16, at float32's
    speed, where the autocast's emulated kernels run many times slower (a Pong APPO ~30 steps/s on a 2-core
    AVX2 CPU): float32 kernels on weights and activations rounded to bfloat16 wherever the bfloat16 kernels
    round (each layer's weights, its result, and the gradients of both: ``RoundToBF16``). A product of two
    bfloat16 values is exact in float32 and a bfloat16 kernel sums in float32 too, so what differs from it is
    the order of the float32 sums, the difference between one CPU's kernels and another's
    (``tests/algos/test_nets.py`` measures it against the autocast).

    ``fp32_tail``: the last layers that run in float32 under ``bf16`` too. A Q-network's output layer needs
    it: bfloat16 keeps 8 significant bits, so Q-values near -1 land on a grid 0.0078 apart, coarser than the
    gaps between actions' values, and the argmax becomes a coin toss (a Pong DQN trained so had its greedy
    action disagree with float32's on every probed state). Policy logits and values are heads outside."""

    channels_last: bool = False
    bf16: bool = False
    round_bf16: bool = False
    _cast: tuple[tuple, list] = ((), [])
    """(key, the weights per layer as the bf16 path computes with them) of the no-autograd path"""
    _pixel_cache: tuple[tuple, tuple] = ((), ())
    """(key, ``_pixel_stats``) for ``normalize``"""
    _normalized: Optional[torch.Tensor] = None
    """``normalized``'s buffer"""

    def __init__(self, *layers: nn.Module, fp32_tail: int = 0, pixel_stats: Optional[tuple[int, int]] = None) -> None:
        super().__init__(*layers)
        if not 0 <= fp32_tail <= len(layers):
            raise ValueError(f"fp32_tail must be in [0, {len(layers)}], got {fp32_tail}")
        self.fp32_tail = fp32_tail
        self.normalizes = pixel_stats is not None
        if pixel_stats is not None:  # buffers: in the state_dict (checkpoints, evaluation) only when on
            # Before any frame is observed: mean 0 and std 255, so frames are scaled as without normalizing
            # (x / 255; what an asynchronous sampler acts on before the learner's first batch, appo.py).
            self.register_buffer("pixel_mean", torch.zeros(pixel_stats, dtype=torch.float64))
            self.register_buffer("pixel_var", torch.full(pixel_stats, 255.0**2 - 1e-5, dtype=torch.float64))
            self.register_buffer("pixel_count", torch.zeros((), dtype=torch.float64))

    def normalize(self, x: torch.Tensor, dtype: torch.dtype = torch.float32,
                  out: Optional[torch.Tensor] = None) -> torch.Tensor:  # fmt: skip
        """uint8 frames [N, C, H, W] -> ``(x - mean) / sqrt(var + 1e-5)`` per pixel, clipped to [-5, 5] (rl_games'
        ``normalize_input``), in ``dtype`` and x's memory layout (into ``out``, laid out as x, where given): static
        background goes to 0, what moves stands out. The statistics are ``observe``'s, one per pixel for all C
        frames of a stack (each is the newest frame of an earlier step). One pass on a CPU (``normalize_rows``)."""
        last = x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)
        mean, scale = self._pixel_stats(x.shape[1], last, x.device)
        if last:  # over the [N, H, W, C] bytes as they lie, the statistics laid out alike
            rows = normalize_rows(x.permute(0, 2, 3, 1), mean, scale, 5.0, dtype, torch.get_num_threads(),
                                  None if out is None else out.permute(0, 2, 3, 1))  # fmt: skip
            return rows.permute(0, 3, 1, 2)
        return normalize_rows(x, mean, scale, 5.0, dtype, torch.get_num_threads(), out)

    def _pixel_stats(self, channels: int, last: bool, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, 1 / sqrt(var + 1e-5)) in float32 for every value of a stack, [H, W, C] (``last``: a channels-last
        stack's order) or [C, H, W]; made again when the statistics change (their version counters)."""
        key = (self.pixel_mean._version, self.pixel_var._version, self.pixel_mean.data_ptr(), channels, last, device)
        if self._pixel_cache[0] != key:
            mean, scale = self.pixel_mean.float(), torch.rsqrt(self.pixel_var.float() + 1e-5)
            stats = [t[:, :, None].expand(-1, -1, channels) if last else t.expand(channels, -1, -1)
                     for t in (mean, scale)]  # fmt: skip
            self._pixel_cache = (key, tuple(t.contiguous().to(device) for t in stats))
        return self._pixel_cache[1]

    @torch.no_grad()
    def normalized(self, frames: torch.Tensor) -> torch.Tensor:
        """uint8 frames [N, C, H, W] normalized once (``normalize``), in the dtype and layout the layers take
        them (bfloat16 under ``bf16``): ``forward`` takes such a batch as it is, so passes over it (PPO's epochs)
        do not normalize it again; the same values as normalizing each minibatch. The batch is written into one
        buffer kept for the next call, which overwrites it (a PPO rollout's, ~115 MB in bfloat16: fresh memory
        of that size took ~50 ms a call to fault in on a 2-core CPU, twice what normalizing into it takes)."""
        layout = torch.channels_last if self.channels_last else torch.contiguous_format
        dtype = self._input_dtype()
        if not frames.is_contiguous(memory_format=layout):  # frames in another layout: normalized, then reordered
            return self.normalize(frames, dtype).contiguous(memory_format=layout)
        out = self._normalized
        if (out is None or out.shape != frames.shape or out.dtype != dtype or out.device != frames.device
                or not out.is_contiguous(memory_format=layout)):  # fmt: skip
            out = self._normalized = torch.empty(frames.shape, dtype=dtype, device=frames.device, memory_format=layout)
        return self.normalize(frames, dtype, out)

    def _input_dtype(self) -> torch.dtype:
        """The dtype the first layer takes: bfloat16 under ``bf16`` (unless rounded in float32), else float32."""
        return torch.bfloat16 if self.bf16 and not self.round_bf16 else torch.float32

    @torch.no_grad()
    def observe(self, frames: torch.Tensor, reduce: Optional[Callable[[torch.Tensor], torch.Tensor]] = None) -> None:
        """Adds the newest frame of each stack in ``frames`` [..., C, H, W] (uint8) to the per-pixel mean and
        variance (float64, ``RunningMeanStd.update_from_moments``); ``reduce`` sums a float64 tensor over data-parallel
        ranks (``World.sum``), so that every rank keeps the statistics of all ranks' frames."""
        newest = frames[..., -1, :, :]
        newest = newest.reshape(-1, *newest.shape[-2:])
        sums = torch.zeros((2, *newest.shape[1:]), dtype=torch.float64, device=frames.device)
        for chunk in newest.split(256):  # float32 sums of 256 rows are exact: integers below 256 * 255**2 < 2**24
            c = chunk.float()
            sums[0] += c.sum(0)
            sums[1] += (c * c).sum(0)
        n = torch.tensor(float(newest.shape[0]), dtype=torch.float64, device=frames.device)
        if reduce is not None:
            sums, n = reduce(sums), reduce(n)
        mean = sums[0] / n
        stats = RunningMeanStd(device=frames.device)  # its merge rule, on these buffers
        stats.mean, stats.var, stats.count = self.pixel_mean, self.pixel_var, self.pixel_count
        stats.update_from_moments(mean, (sums[1] / n - mean * mean).clamp(min=0), n)
        self.pixel_mean.copy_(stats.mean)
        self.pixel_var.copy_(stats.var)
        self.pixel_count.copy_(stats.count)

    def set_speed(self, channels_last: bool = False, bf16: bool = False, round_bf16: bool = False) -> "FrameNet":
        if bf16 and (odd := [type(m).__name__ for m in self if next(m.parameters(), None) is not None and
                             not isinstance(m, (nn.Conv2d, nn.Linear))]):  # fmt: skip
            raise ValueError(f"FrameNet's bf16 path runs Conv2d and Linear layers only, not {odd}")
        self.channels_last, self.bf16, self.round_bf16 = channels_last, bf16, bf16 and round_bf16
        if bf16:
            _count_steps_for_bf16()
        self._cast = ((), [])
        self.to(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layout = torch.channels_last if self.channels_last else torch.contiguous_format
        if self.normalizes and not x.is_floating_point():  # a floating x is ``normalized``'s
            x = self.normalize(x, self._input_dtype())
        if not self.bf16:
            h = x.contiguous(memory_format=layout)  # the layout change on uint8 bytes (without normalize)
            return super().forward(h if self.normalizes else h / 255.0)
        dtype = torch.float32 if self.round_bf16 else torch.bfloat16
        h = x.to(dtype).contiguous(memory_format=layout)  # in this order 2x faster than in one copy
        cached = not torch.is_grad_enabled() and not torch.compiler.is_compiling()
        layers = list(self)
        split = len(layers) - self.fp32_tail
        weights = self._bf16_weights() if cached else [_cast(w, self._bf16) for w in self._weights()]
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=not self.round_bf16):
            for layer, w in zip(layers[:split], weights):
                if w is None:
                    h = layer(h)
                elif isinstance(layer, nn.Conv2d):
                    h = self._round(layer._conv_forward(h, *w))
                else:
                    h = self._round(nn.functional.linear(h, *w))
        h = h.float()
        for layer in layers[split:]:  # the float32 tail
            h = layer(h)
        return h

    def _bf16(self, t: torch.Tensor) -> torch.Tensor:
        """A weight as the bf16 path computes with it: cast to bfloat16, or rounded to it in float32."""
        return RoundToBF16.apply(t) if self.round_bf16 else t.to(torch.bfloat16)

    def _round(self, h: torch.Tensor) -> torch.Tensor:
        """A layer's result as a bfloat16 kernel returns it (under ``round_bf16``; the autocast's already is)."""
        return RoundToBF16.apply(h) if self.round_bf16 else h

    def _weights(self) -> list[Weights]:
        """Per layer: its (weight, bias), the first such layer's weight times 1 / 255 (unless ``normalize``); None for
        a layer without."""
        out: list[Weights] = []
        for layer in self:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                first = all(w is None for w in out) and not self.normalizes
                out.append((layer.weight / 255.0 if first else layer.weight, layer.bias))
            else:
                out.append(None)
        return out

    def _bf16_weights(self) -> list[Weights]:
        """``_weights()`` as the bf16 path computes with them (``_bf16``; in the layout of the float32 ones), made
        again when a weight changed."""
        params = list(self.parameters())
        key = tuple((p._version, p.data_ptr(), p.device) for p in params)
        if key != self._cast[0]:
            with torch.no_grad():
                self._cast = (key, [_cast(w, self._bf16) for w in self._weights()])
        return self._cast[1]


def set_speed(model: nn.Module, channels_last: bool = False, bf16: bool = False, round_bf16: bool = False) -> nn.Module:
    """``FrameNet.set_speed`` on every FrameNet in ``model`` (a no-op for models without one); returns it."""
    for m in model.modules():
        if isinstance(m, FrameNet):
            m.set_speed(channels_last, bf16, round_bf16)
    return model


def describe_speed(models: Iterable[nn.Module], denormals: bool, auto: bool) -> str:
    """``  cnn: channels-last + bf16`` (what ``models``' FrameNets run with; ``auto``: picked by --auto-speed), or ""
    without a FrameNet: the run's header line says it."""
    nets = [m for model in models for m in model.modules() if isinstance(m, FrameNet)]
    if not nets:
        return ""
    bf16 = "bf16 (rounded in float32)" if nets[0].round_bf16 else "bf16"
    picked = [name for name, on in (("channels-last", nets[0].channels_last), (bf16, nets[0].bf16)) if on]
    picked += ["denormals flushed"] if denormals else []
    return f"  cnn: {' + '.join(picked) or 'float32 NCHW'}{' (--auto-speed)' if auto else ''}"


F = TypeVar("F", bound=Callable[..., Any])


def compiled(fn: F, compile: bool, cudagraphs: bool) -> F:
    """``fn`` unchanged, ``torch.compile``d (``compile``), or compiled with CUDA graphs (``cudagraphs``: mode
    "reduce-overhead"), each call then marking a new graph step."""
    if not (compile or cudagraphs):
        return fn
    fast = torch.compile(fn, mode="reduce-overhead" if cudagraphs else None)
    if not cudagraphs:
        return fast

    @functools.wraps(fn)
    def graph_step(*args: Any, **kwargs: Any) -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return fast(*args, **kwargs)

    return graph_step  # type: ignore[return-value]
