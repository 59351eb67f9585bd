"""rlfast._C.normalize_frames (rlfast/algos/frame_norm.py): the values torch's ops give, bit for bit, and errors
that name what is wrong."""

import numpy as np
import pytest
import torch

from rlfast._ext import _C
from rlfast.algos.frame_norm import normalize_rows

DTYPES = [torch.float32, torch.bfloat16]


def torch_ops(rows: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor, limit: float, dtype: torch.dtype):
    """What FrameNet.normalize computed with torch's element-wise ops before the kernel."""
    return torch.sub(rows, mean).mul_(scale).clamp_(-limit, limit).to(dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16 if t.dtype == torch.bfloat16 else torch.int32)


def inputs(shape: tuple[int, ...], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    mean = torch.rand(shape[1:], generator=g) * 255
    scale = torch.rand(shape[1:], generator=g) * 0.2
    scale.view(-1)[::5] = 1e-5**-0.5  # a still pixel (variance 0): any other value is clipped
    mean.view(-1)[::7] = rows.view(rows.shape[0], -1)[0, ::7].float()  # values equal to their mean: exactly 0
    return rows, mean, scale


# odd sizes: not a multiple of any vector width (the loops' tails); 300 x 28,224 values: split over threads
@pytest.mark.parametrize("shape", [(8, 84, 84, 4), (3, 5, 7), (1, 1), (300, 4, 84, 84)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_gives_torchs_values_bit_for_bit(shape, dtype):
    rows, mean, scale = inputs(shape)
    want = torch_ops(rows, mean, scale, 5.0, dtype)
    if rows.numel() > 35:  # the clip and the exact zeros are exercised
        assert want.abs().max() == 5.0 and (want == 0).any()
    for threads in (1, 2, 3):
        got = normalize_rows(rows, mean, scale, 5.0, dtype, threads)
        assert got.dtype == dtype and got.shape == rows.shape
        assert torch.equal(bits(got), bits(want)), f"threads={threads}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_rounding_to_bfloat16_ties_to_even_as_torch(dtype):
    # scale 1, mean chosen so that x - mean lands on values between two bfloat16s, ties among them
    rows = torch.arange(256, dtype=torch.uint8).reshape(1, 256).repeat(4, 1)
    mean = torch.tensor([0.0, -1 / 512, 1 / 256 + 1 / 65536, 3 / 1024])[:, None].repeat(1, 64).reshape(256)
    scale = torch.full((256,), 1.0 + 2**-9)
    got = normalize_rows(rows, mean, scale, 300.0, dtype)
    assert torch.equal(bits(got), bits(torch_ops(rows, mean, scale, 300.0, dtype)))


def test_out_is_written_and_returned():
    rows, mean, scale = inputs((5, 6, 7))
    out = torch.full((5, 6, 7), float("nan"), dtype=torch.bfloat16)
    assert normalize_rows(rows, mean, scale, 5.0, torch.bfloat16, out=out) is out
    assert torch.equal(bits(out), bits(torch_ops(rows, mean, scale, 5.0, torch.bfloat16)))


def test_no_rows():
    rows, mean, scale = inputs((1, 6))
    assert normalize_rows(rows[:0], mean, scale, 5.0, torch.bfloat16, threads=4).shape == (0, 6)


def test_the_torch_path_takes_what_the_kernel_does_not():
    # a non-contiguous batch or a dtype the kernel does not write: torch's ops, the same values
    rows, mean, scale = inputs((6, 10, 3))
    strided = rows.transpose(1, 2)
    assert torch.equal(normalize_rows(strided, mean.T, scale.T, 5.0), torch_ops(strided, mean.T, scale.T, 5.0,
                                                                              torch.float32))  # fmt: skip
    half = normalize_rows(rows, mean, scale, 5.0, torch.float16)
    assert half.dtype == torch.float16 and torch.equal(half, torch_ops(rows, mean, scale, 5.0, torch.float16))


def test_bad_inputs_are_named():
    rows, mean, scale = inputs((2, 3, 4))
    with pytest.raises(ValueError, match="uint8 frames, got torch.float32"):
        normalize_rows(rows.float(), mean, scale, 5.0)
    with pytest.raises(ValueError, match=r"mean \(3, 5\) and scale \(3, 4\) must have the shape of a row"):
        normalize_rows(rows, torch.zeros(3, 5), scale, 5.0)
    with pytest.raises(ValueError, match=r"out must be a contiguous torch.bfloat16 tensor of shape \(2, 3, 4\)"):
        normalize_rows(rows, mean, scale, 5.0, torch.bfloat16, out=torch.empty(2, 3, 4))
    # the binding's own checks, for a caller that does not go through normalize_rows
    out = np.empty((2, 3, 4), dtype=np.float32)
    m, s = mean.numpy(), scale.numpy()
    with pytest.raises(ValueError, match="frames must be uint8"):
        _C.normalize_frames(rows.numpy().astype(np.int16), m, s, out, 5.0)
    with pytest.raises(ValueError, match="mean must be float32"):
        _C.normalize_frames(rows.numpy(), m.astype(np.float64), s, out, 5.0)
    with pytest.raises(ValueError, match="frames must be C-contiguous"):
        _C.normalize_frames(rows.numpy().transpose(0, 2, 1), m, s, out.transpose(0, 2, 1), 5.0)
    with pytest.raises(ValueError, match="out must have the shape of frames"):
        _C.normalize_frames(rows.numpy(), m, s, out[:1], 5.0)
    with pytest.raises(ValueError, match="frames must hold 12 values"):
        _C.normalize_frames(rows.numpy()[:, :2].copy(), m, s, out[:, :2].copy(), 5.0)
    with pytest.raises(ValueError, match="out must be float32 or uint16"):
        _C.normalize_frames(rows.numpy(), m, s, out.astype(np.float64), 5.0)
    with pytest.raises(ValueError, match="limit must be >= 0"):
        _C.normalize_frames(rows.numpy(), m, s, out, -1.0)
