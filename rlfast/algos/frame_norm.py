"""Per-pixel normalization of uint8 frames, ``clamp((frames - mean) * scale, -limit, limit)`` (``FrameNet.normalize``,
``--normalize-frames``): on a CPU one pass of ``rlfast._C.normalize_frames`` straight into the layers' dtype, elsewhere
(a GPU, under ``torch.compile``) torch's element-wise ops. Both give the same values: the kernel computes in float32
in torch's order without fused multiply-adds and rounds to bfloat16 as torch's cast does (nearest, ties to even).

On a 2-core CPU torch's ops took ~0.3 ms for the 8 stacks an env group acts on (a subtraction into a float32
temporary, a multiplication, a clamp and the cast to bfloat16, each a pass over memory), a quarter of the acting
call; the kernel reads the bytes once and writes the result once, in 0.1 ms (docs/performance/cpu.md)."""

from typing import Optional

import torch

from rlfast._ext import _C

KERNEL_DTYPES = {torch.float32: torch.float32, torch.bfloat16: torch.uint16}
"""the dtypes the kernel writes: float32, or bfloat16 as its bits (uint16, which numpy has)"""


def normalize_rows(rows: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor, limit: float,
                   dtype: torch.dtype = torch.float32, threads: int = 1,
                   out: Optional[torch.Tensor] = None) -> torch.Tensor:  # fmt: skip
    """uint8 ``rows`` [N, *S] (each row one frame stack as it lies in memory) -> ``clamp((rows - mean) * scale,
    -limit, limit)`` in ``dtype``, where ``mean`` and ``scale`` are float32 [*S] on ``rows``' device. ``threads``:
    how many threads the kernel may split a large batch over (a thread per million values at most). ``out``: a
    contiguous tensor of that shape and dtype to write into (a large batch's fresh memory costs more to fault in
    than the kernel takes to fill it)."""
    if rows.dtype != torch.uint8:
        raise ValueError(f"normalize_rows takes uint8 frames, got {rows.dtype}")
    if mean.shape != rows.shape[1:] or scale.shape != rows.shape[1:]:
        raise ValueError(f"mean {tuple(mean.shape)} and scale {tuple(scale.shape)} must have the shape of a row of "
                         f"frames {tuple(rows.shape)}")  # fmt: skip
    if out is not None and (out.shape != rows.shape or out.dtype != dtype or out.device != rows.device
                            or not out.is_contiguous()):  # fmt: skip
        raise ValueError(f"out must be a contiguous {dtype} tensor of shape {tuple(rows.shape)} on {rows.device}, got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")  # fmt: skip
    on_kernel = (rows.device.type == "cpu" and dtype in KERNEL_DTYPES and rows.is_contiguous()
                 and mean.dtype == scale.dtype == torch.float32 and mean.is_contiguous() and scale.is_contiguous()
                 and not torch.compiler.is_compiling())  # fmt: skip
    if not on_kernel:
        result = torch.sub(rows, mean).mul_(scale).clamp_(-limit, limit).to(dtype)
        return result if out is None else out.copy_(result)
    if out is None:
        out = torch.empty(rows.shape, dtype=dtype)
    _C.normalize_frames(rows.numpy(), mean.numpy(), scale.numpy(), out.view(KERNEL_DTYPES[dtype]).numpy(),
                        float(limit), int(threads))  # fmt: skip
    return out
