"""FrameNet's CPU speed options (channels-last, bf16 autocast, bf16 rounded in float32) keep the network's math,
keys and dtypes."""

import copy
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlfast.algos.nets import NatureCNNAgent

from rlfast.algos import speed
from rlfast.algos.speed import FrameNet, auto_bf16, native_bf16, set_speed

ROOT = Path(__file__).resolve().parents[2]
BF16_PATHS = pytest.mark.parametrize("round_bf16", [False, True], ids=["autocast", "rounded"])
"""a test of the bf16 path, run on both ways of computing it: the autocast's kernels and float32 on rounded values"""


def frames(n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 4, 84, 84), dtype=torch.uint8, generator=g)


def loss_and_grads(agent, x, actions):
    _, logprob, entropy, value = agent.get_action_and_value(x, actions)
    loss = -logprob.mean() - 0.01 * entropy.mean() + 0.5 * value.square().mean()
    agent.zero_grad(set_to_none=True)
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in agent.named_parameters()}


def test_state_dict_keys_are_the_plain_sequentials():
    # checkpoints of the CleanRL-shaped networks load unchanged: FrameNet adds no key
    agent = NatureCNNAgent(4, 6)
    assert isinstance(agent.network, FrameNet)
    assert [k for k in agent.state_dict() if k.startswith("network.")] == [
        f"network.{i}.{p}" for i in (0, 2, 4, 7) for p in ("weight", "bias")
    ]
    plain = torch.nn.Sequential(*agent.network)
    assert list(plain.state_dict()) == [k.removeprefix("network.") for k in agent.state_dict() if "network." in k]


def test_default_is_cleanrls_forward():
    torch.manual_seed(0)
    agent, x = NatureCNNAgent(4, 6), frames()
    expected = torch.nn.Sequential(*agent.network)(x / 255.0)
    assert torch.equal(agent.hidden(x), expected)


def test_channels_last_keeps_the_math():
    torch.manual_seed(0)
    agent, x, actions = NatureCNNAgent(4, 6), frames(), torch.randint(0, 6, (16,))
    fast = set_speed(copy.deepcopy(agent), channels_last=True)
    conv = fast.network[0].weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    loss, grads = loss_and_grads(agent, x, actions)
    fast_loss, fast_grads = loss_and_grads(fast, x, actions)
    # other convolution kernels: the same sums in another order (float32 rounding only)
    torch.testing.assert_close(fast_loss, loss, rtol=1e-5, atol=1e-6)
    for k in grads:
        scale = grads[k].abs().max().item()
        torch.testing.assert_close(fast_grads[k], grads[k], rtol=0, atol=1e-4 * scale + 1e-8, msg=k)
    # back to the contiguous layout: set_speed() with no options
    assert set_speed(fast).network[0].weight.is_contiguous()


def test_pixel_statistics_are_those_of_every_newest_frame_observed():
    torch.manual_seed(0)
    net = NatureCNNAgent(4, 6, normalize=True).network
    assert net.pixel_count.item() == 0 and net.pixel_mean.shape == (84, 84)
    x = frames(3, 0)  # nothing observed yet: the frames scaled as without normalizing, x / 255
    torch.testing.assert_close(net.normalize(x), x.float() / 255.0, rtol=1e-6, atol=1e-7)
    batches = [frames(n, seed) for n, seed in ((3, 1), (300, 2), (5, 3))]  # 300: more than one chunk
    batches[1] = batches[1].contiguous(memory_format=torch.channels_last)  # a rollout's layout
    for b in batches:
        net.observe(b)
    newest = torch.cat([b[:, -1] for b in batches]).double()  # each stack's newest frame (channel -1) only
    assert net.pixel_count.item() == 308
    torch.testing.assert_close(net.pixel_mean, newest.mean(0))
    torch.testing.assert_close(net.pixel_var, newest.var(0, unbiased=False))
    rollout = batches[1].reshape(30, 10, 4, 84, 84)  # [T, B, C, H, W] rows count the same
    net.observe(rollout)
    assert net.pixel_count.item() == 608


@pytest.mark.parametrize("channels_last", [False, True])
def test_normalized_frames_feed_the_first_layer_unscaled(channels_last):
    # (x - mean) / sqrt(var + 1e-5) per pixel, clipped to [-5, 5], goes to the first layer as it is (no 1 / 255)
    torch.manual_seed(0)
    agent = NatureCNNAgent(4, 6, normalize=True)
    net = agent.network
    net.pixel_mean.fill_(100.0)
    net.pixel_var.fill_(4.0 - 1e-5)  # a scale of 1 / 2
    net.pixel_var[:10] = 0.0  # a still pixel: its value is its mean, normalized to 0
    x = frames()
    x[:, :, :10] = 100
    expected = torch.nn.Sequential(*net)(((x.float() - 100.0) / 2.0).clamp(-5.0, 5.0))
    normalized = net.normalize(x)
    assert normalized.abs().max() == 5.0 and (normalized[:, :, :10] == 0).all()
    set_speed(agent, channels_last=channels_last)
    # channels-last runs other convolution kernels: float32 rounding relative to the features' size (a scale
    # ~32 here; 1.6e-5 apart on an AVX2-only CPU), where the frames / 255 would be off by ~the scale itself
    scale = expected.abs().max().item()
    torch.testing.assert_close(agent.hidden(x.contiguous(memory_format=torch.channels_last)), expected,
                               rtol=0, atol=1e-5 * scale)  # fmt: skip
    assert "network.pixel_mean" in agent.state_dict() and "network.pixel_mean" not in NatureCNNAgent(4, 6).state_dict()


@pytest.mark.parametrize("mode", ["float32", "float32 channels-last", "bf16", "rounded bf16"])
def test_a_batch_normalized_once_gives_what_its_frames_give(mode):
    # PPO normalizes its rollout once for all epochs (FrameNet.normalized); forward takes it as it is
    torch.manual_seed(0)
    bf16 = mode.endswith("bf16")
    agent = set_speed(NatureCNNAgent(4, 6, width=0.5, normalize=True), channels_last=mode != "float32", bf16=bf16,
                      round_bf16=mode == "rounded bf16")  # fmt: skip
    agent.network.observe(frames(300, seed=1))
    x = frames(260, seed=2)  # more rows than one chunk
    if mode != "float32":
        x = x.contiguous(memory_format=torch.channels_last)
    once = agent.network.normalized(x)
    assert once.dtype == (torch.bfloat16 if mode == "bf16" else torch.float32) and once.shape == x.shape
    assert once.is_contiguous(memory_format=torch.channels_last if mode != "float32" else torch.contiguous_format)
    assert torch.equal(agent.hidden(once), agent.hidden(x))
    # the next rollout's batch goes into the same buffer (its fresh memory would cost more than normalizing it)
    y = frames(260, seed=3)
    if mode != "float32":
        y = y.contiguous(memory_format=torch.channels_last)
    again = agent.network.normalized(y)
    assert again.data_ptr() == once.data_ptr() and torch.equal(agent.hidden(again), agent.hidden(y))


def test_normalized_follows_a_change_of_speed_options():
    # the kept buffer is made again when the layers' dtype or layout changes (set_speed between calls)
    agent = NatureCNNAgent(4, 6, width=0.5, normalize=True)
    agent.network.observe(frames(20, seed=1))
    x = frames(20, seed=2)
    assert agent.network.normalized(x).dtype == torch.float32
    for channels_last, bf16 in ((True, False), (True, True), (False, True)):
        set_speed(agent, channels_last=channels_last, bf16=bf16)
        layout = torch.channels_last if channels_last else torch.contiguous_format
        x = x.contiguous(memory_format=layout)
        once = agent.network.normalized(x)
        assert once.is_contiguous(memory_format=layout) and once.dtype == (torch.bfloat16 if bf16 else torch.float32)
        assert torch.equal(agent.hidden(once), agent.hidden(x))


@BF16_PATHS
def test_bf16_is_close_and_returns_float32(round_bf16):
    torch.manual_seed(0)
    agent, x, actions = NatureCNNAgent(4, 6), frames(), torch.randint(0, 6, (16,))
    fast = set_speed(copy.deepcopy(agent), bf16=True, round_bf16=round_bf16)
    hidden, fast_hidden = agent.hidden(x), fast.hidden(x)
    assert fast_hidden.dtype == torch.float32 and all(p.dtype == torch.float32 for p in fast.parameters())
    # bfloat16 keeps 8 bits of mantissa: ~0.4% per rounding, a few roundings deep
    assert not torch.equal(fast_hidden, hidden)
    assert (fast_hidden - hidden).abs().max() <= 0.05 * hidden.abs().max()
    loss, grads = loss_and_grads(agent, x, actions)
    fast_loss, fast_grads = loss_and_grads(fast, x, actions)
    assert fast_loss.dtype == torch.float32 and abs(fast_loss - loss) <= 0.02 * abs(loss)
    for k in grads:
        cos = torch.nn.functional.cosine_similarity(fast_grads[k].flatten(), grads[k].flatten(), dim=0)
        assert cos > 0.98, (k, cos.item())


@BF16_PATHS
def test_bf16_feeds_the_first_layer_the_frames_and_scales_its_weights(round_bf16):
    # the same values as the autocast of CleanRL's float32 forward: bf16(x / 255) and bf16(W) there,
    # x (exact in bf16) and bf16(W / 255) here; each a bf16 rounding of the same products
    torch.manual_seed(0)
    agent, x = NatureCNNAgent(4, 6), frames()
    fast = set_speed(copy.deepcopy(agent), bf16=True, round_bf16=round_bf16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        reference = torch.nn.Sequential(*agent.network)(x / 255.0).float()
    got = fast.hidden(x)
    assert (got - reference).abs().max() <= 0.02 * reference.abs().max()
    assert torch.equal(x.to(torch.bfloat16).float(), x.float())  # the frames themselves: exact


@BF16_PATHS
@pytest.mark.parametrize("channels_last", [False, True])
def test_bf16_forward_without_autograd_equals_the_autograd_one(channels_last, round_bf16):
    # acting (no autograd) runs on cached bfloat16 weights, training on casts made at each call: same numbers
    torch.manual_seed(0)
    fast = set_speed(NatureCNNAgent(4, 6), channels_last=channels_last, bf16=True, round_bf16=round_bf16)
    x = frames()
    with torch.no_grad():
        acting = fast.hidden(x)
    training = fast.hidden(x)
    assert training.requires_grad and torch.equal(acting, training.detach())


@BF16_PATHS
def test_bf16_weights_are_cast_once_per_change_of_the_weights(round_bf16):
    torch.manual_seed(0)
    fast, x = set_speed(NatureCNNAgent(4, 6), bf16=True, round_bf16=round_bf16), frames(4)
    net = fast.network

    def acting():
        with torch.no_grad():
            return fast.hidden(x)

    first = acting()
    cast = net._cast[1]
    assert torch.equal(acting(), first) and net._cast[1] is cast  # no change: the same copies
    fresh = lambda: set_speed(copy.deepcopy(fast), bf16=True, round_bf16=round_bf16).hidden(x).detach()  # noqa: E731
    # every way the trainers change weights makes new copies: a fused Adam step (which leaves the version
    # counters alone; the optimizer hook counts it), a plain one, load_state_dict, copy_ (soft updates)
    for fused in (True, False):
        optimizer = torch.optim.Adam(fast.parameters(), lr=1e-2, fused=fused)
        fast.hidden(x).square().mean().backward()
        optimizer.step()
        assert net._cast[1] is cast  # nothing cast until the next forward
        moved = acting()
        assert not torch.equal(moved, first) and torch.equal(moved, fresh())
        cast, first = net._cast[1], moved
    fast.load_state_dict(NatureCNNAgent(4, 6).state_dict())
    assert torch.equal(acting(), fresh()) and not torch.equal(acting(), first)
    with torch.no_grad():
        net[7].weight.copy_(net[7].weight * 0.5)
    assert torch.equal(acting(), fresh())


@BF16_PATHS
def test_bf16_scales_the_first_layer_with_weights_even_behind_others(round_bf16):
    torch.manual_seed(0)
    net = FrameNet(torch.nn.Identity(), torch.nn.Conv2d(4, 8, 8, stride=4), torch.nn.ReLU(), torch.nn.Flatten(),
                   torch.nn.Linear(8 * 20 * 20, 4))  # fmt: skip
    x = frames(4)
    expected = net(x)
    fast = copy.deepcopy(net).set_speed(bf16=True, round_bf16=round_bf16)
    for got in (fast(x), torch.no_grad()(fast)(x)):
        assert (got - expected).abs().max() <= 0.02 * expected.abs().max()


def test_bf16_refuses_layers_it_cannot_run():
    with pytest.raises(ValueError, match="BatchNorm2d"):
        FrameNet(torch.nn.Conv2d(4, 8, 3), torch.nn.BatchNorm2d(8)).set_speed(bf16=True)


def test_native_bf16_follows_the_cpu_flags(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else None
    if flags is None:
        pytest.skip("no /proc/cpuinfo to compare with")
    has = " avx512_bf16" in flags or " amx_bf16" in flags
    assert native_bf16(torch.device("cpu")) == (has and torch.backends.mkldnn.is_available())
    assert native_bf16(torch.device("meta")) is False


def test_native_bf16_is_off_under_a_onednn_cap_without_it(monkeypatch):
    # CI runs the golden traces under ONEDNN_MAX_CPU_ISA=SSE41: there bf16 would be emulated (minutes a run)
    for cap in ("SSE41", "avx2", "AVX512_CORE"):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        assert native_bf16(torch.device("cpu")) is False
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    has = bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    assert native_bf16(torch.device("cpu")) == (has and torch.backends.mkldnn.is_available())


def test_auto_bf16_takes_amx_or_amd_and_not_intel_without_amx(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    cpu = torch.device("cpu")
    assert auto_bf16(torch.device("meta")) is False and auto_bf16(torch.device("cuda")) is False
    for native, amx, vendor, want in ((True, True, "GenuineIntel", True),  # AMX: bf16
                                      (True, False, "GenuineIntel", False),  # AVX512-BF16 alone on Intel: float32
                                      (True, False, "AuthenticAMD", True),  # AVX512-BF16 on AMD: bf16, as timed
                                      (False, False, "AuthenticAMD", False),  # no native bf16: float32
                                      (True, False, "", False)):  # fmt: skip
        monkeypatch.setattr(speed, "native_bf16", lambda device, native=native: native)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda amx=amx: amx)
        monkeypatch.setattr(speed, "cpu_vendor", lambda vendor=vendor: vendor)
        assert auto_bf16(cpu) is want, (native, amx, vendor)
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")  # below AMX: the tiles are not used
        assert auto_bf16(cpu) is (want and vendor == "AuthenticAMD"), (native, amx, vendor)
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    monkeypatch.undo()
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    vendor = next((x.split(":", 1)[1].strip() for x in flags.splitlines() if x.startswith("vendor_id")), "")
    assert speed.cpu_vendor() == vendor
    amx = " amx_tile" in flags and native_bf16(cpu)
    assert auto_bf16(cpu) == (amx or (native_bf16(cpu) and vendor == "AuthenticAMD"))  # this machine


def test_dqn_atari_q_network_takes_the_same_options():
    spec = importlib.util.spec_from_file_location("dqn_atari_for_test", ROOT / "scripts" / "dqn_atari.py")
    dqn_atari = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dqn_atari)
    torch.manual_seed(0)
    q, x = dqn_atari.QNetwork(6), frames(8)
    assert list(q.state_dict())[:2] == ["network.0.weight", "network.0.bias"]
    fast = set_speed(copy.deepcopy(q), channels_last=True)
    torch.testing.assert_close(fast(x), q(x), rtol=1e-5, atol=1e-6)


@BF16_PATHS
def test_fp32_tail_runs_the_last_layers_in_float32_under_bf16(round_bf16):
    torch.manual_seed(0)
    trunk = [torch.nn.Conv2d(4, 8, 8, stride=4), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 20 * 20, 16),
             torch.nn.ReLU()]  # fmt: skip
    head = torch.nn.Linear(16, 6)
    net = FrameNet(*trunk, head, fp32_tail=1).set_speed(channels_last=True, bf16=True, round_bf16=round_bf16)
    bf16_trunk = FrameNet(*trunk).set_speed(channels_last=True, bf16=True, round_bf16=round_bf16)  # no tail
    x = frames(8)
    for grad in (True, False):  # the autograd path and the cached no-autograd path
        with torch.set_grad_enabled(grad):
            got = net(x)
            assert torch.equal(got, head(bf16_trunk(x)))  # the head on the float32 features, in float32
            assert (got.to(torch.bfloat16).float() != got).any()  # not rounded to bf16's grid
    assert net.state_dict().keys() == FrameNet(*trunk, head).state_dict().keys()  # checkpoints unchanged
    with pytest.raises(ValueError, match="fp32_tail must be in"):
        FrameNet(torch.nn.Linear(2, 2), fp32_tail=2)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_core_is_torch_own_cell_and_starts_zero_the_state(cell):
    """``RecurrentNatureCNNAgent.unroll`` writes out nn.LSTM's / nn.GRU's equations on their parameters: the same
    outputs as the module over a sequence; a start at step t equals unrolling from zeros at t."""
    from rlfast.algos.nets import RecurrentNatureCNNAgent

    torch.manual_seed(0)
    agent = RecurrentNatureCNNAgent(4, 6, cell=cell).double()
    T, N = 6, 3
    features = torch.randn(T * N, 512, dtype=torch.float64)
    agent.network.forward = lambda x: x  # feed features straight to the core
    state = torch.randn(N, 2 if cell == "lstm" else 1, 128, dtype=torch.float64)
    out, final = agent.unroll(features, state, torch.zeros(T * N, dtype=torch.bool))
    h0 = state[:, 0].unsqueeze(0).contiguous()
    ref, ref_final = agent.core(features.view(T, N, 512), (h0, state[:, 1].unsqueeze(0).contiguous()) if cell == "lstm"
                                else h0)  # fmt: skip
    torch.testing.assert_close(out, ref.reshape(T * N, 128), rtol=0, atol=1e-12)
    ref_h = ref_final[0][0] if cell == "lstm" else ref_final[0]
    torch.testing.assert_close(final[:, 0], ref_h, rtol=0, atol=1e-12)
    starts = torch.zeros(T, N, dtype=torch.bool)
    starts[3, 1] = True  # env 1 starts an episode at step 3
    out, _ = agent.unroll(features, state, starts.flatten())
    fresh, _ = agent.unroll(features.view(T, N, 512)[3:, 1], agent.initial_state(1).double(), torch.zeros(T - 3))
    torch.testing.assert_close(out.view(T, N, 128)[3:, 1], fresh, rtol=0, atol=1e-12)
    torch.testing.assert_close(out.view(T, N, 128)[:3], ref.view(T, N, 128)[:3], rtol=0, atol=1e-12)


def test_flush_denormals_reaches_the_threads_started_after_it():
    # a new thread inherits its creator's floating-point state: flushing before torch's pool starts reaches all
    # of its threads (the probe multiplies denormals across the pool); a pool started earlier keeps its own
    code = """
import sys, torch
torch.set_num_threads(2)
if sys.argv[1] == "late":
    torch.ones(1 << 20).mul_(2.0)  # starts the pool's threads before the flush
from rlfast.algos.speed import denormals_flushed, flush_denormals
before = denormals_flushed()
print(before, flush_denormals(), denormals_flushed())
"""
    import subprocess
    import sys

    runs = {when: subprocess.run([sys.executable, "-c", code, when], capture_output=True, text=True, check=True,
                                 cwd=ROOT).stdout.split() for when in ("early", "late")}  # fmt: skip
    assert runs["early"] == ["False", "True", "True"]
    assert runs["late"] == ["False", "False", "True"]  # this thread flushes; the pool's other thread does not


def test_flushed_denormals_leave_adams_weights_as_they_were():
    # Adam's moments of a weight whose gradient stays 0 decay into the denormals; flushing them to 0 changes
    # no weight (such a moment moves its weight by far less than the weight's last bit)
    from rlfast.algos.speed import denormals_flushed

    def steps(flush):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
        x = torch.randn(32, 64, generator=torch.Generator().manual_seed(1))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # every op on this thread, whose mode the test sets
        torch.set_flush_denormal(flush)
        try:
            for i in range(1000):
                if i == 20:  # half the hidden units die: their weights' gradients are 0 from here on
                    with torch.no_grad():
                        net[0].bias[:128] = -1e3
                net(x).square().mean().backward()
                optimizer.step()
                optimizer.zero_grad()
            assert denormals_flushed() == flush
        finally:
            torch.set_flush_denormal(False)
            torch.set_num_threads(threads)
        moments = optimizer.state[net[0].weight]["exp_avg"]
        denormal = ((moments != 0) & (moments.abs() < torch.finfo(torch.float32).tiny)).sum().item()
        return [p.detach().clone() for p in net.parameters()], denormal

    kept, denormal_kept = steps(False)
    flushed, denormal_flushed = steps(True)
    assert denormal_kept > 1000 and denormal_flushed == 0  # the case is real: denormals there, and flushed
    for a, b in zip(kept, flushed):
        assert torch.equal(a, b)


@pytest.mark.parametrize("channels_last", [False, True])
def test_rounded_bf16_computes_the_autocasts_numbers(channels_last):
    # float32 kernels on values rounded where the bfloat16 kernels round: the autocast's numbers up to the order
    # of float32 sums, which flips a rounding now and then. Measured on the 2-core AMD EPYC (AVX2, the autocast's
    # kernels emulated there), batch 64: 1.0-1.5% of the features differ by a bf16 step, the loss by 3-7e-6
    # (relative), each gradient by at most 0.0084 (relative norm: the first layer's, whose 1 / 255 comes after
    # the rounding); the autocast's own NCHW and channels-last kernels differ from each other by 1.1%, 1.3e-7
    # and 0.0051. Plain float32 (no rounding) lies 50%, 2.6e-4 and 0.025 from the autocast: the bounds below
    # fail it, and they fail a path that leaves out the gradients' rounding (off bfloat16's grid).
    # (python3 benchmarks/bench_bf16_rounding.py prints these distances.)
    torch.manual_seed(0)
    agent, x, actions = NatureCNNAgent(4, 6), frames(64), torch.randint(0, 6, (64,))
    got, want = (set_speed(copy.deepcopy(agent), channels_last=channels_last, bf16=True, round_bf16=rounded)
                 for rounded in (True, False))  # fmt: skip
    with torch.no_grad():
        features, reference = got.hidden(x), want.hidden(x)
    assert torch.equal(features.to(torch.bfloat16).float(), features)  # on bfloat16's grid, as the autocast's
    assert (features != reference).float().mean() <= 0.05
    loss, grads = loss_and_grads(got, x, actions)
    ref_loss, ref_grads = loss_and_grads(want, x, actions)
    assert abs(loss - ref_loss) <= 5e-5 * abs(ref_loss)
    for k in ref_grads:
        assert (grads[k] - ref_grads[k]).norm() <= 0.015 * ref_grads[k].norm(), k
        if k.startswith("network.") and k != "network.0.weight":  # the kernels' gradients, but for the 1 / 255
            assert torch.equal(grads[k].to(torch.bfloat16).float(), grads[k]), k


def test_the_bf16_optimizer_hook_is_registered_only_once_bf16_is_on():
    """speed.py counts fused optimizer steps for FrameNet's bf16 weight cache: a process-wide hook that a run
    without bf16 must not get (a fresh interpreter, so no other test has turned bf16 on before)."""
    code = (
        "import torch\n"
        "from torch.optim import optimizer as o\n"
        "from rlfast.algos import nets, speed\n"
        "before = len(o._global_optimizer_post_hooks)\n"
        "net = speed.set_speed(nets.NatureCNNAgent(4, 6))\n"
        "plain = len(o._global_optimizer_post_hooks)\n"
        "speed.set_speed(net, bf16=True); speed.set_speed(nets.NatureCNNAgent(4, 6), bf16=True)\n"
        "print(before, plain, len(o._global_optimizer_post_hooks))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["0", "0", "1"], out.stderr


@pytest.mark.parametrize("size, last", [(84, 7), (64, 4), (36, 1)])
def test_nature_cnn_sizes_its_linear_layer_from_the_frames(size, last):
    agent = NatureCNNAgent(4, 6, width=0.5, frame_size=size)
    assert agent.network[7].in_features == 32 * last * last
    x = torch.randint(0, 256, (3, 4, size, size), dtype=torch.uint8)
    assert agent.get_value(x).shape == (3,)
    with pytest.raises(ValueError, match="frames of 35x35 are too small for the Nature CNN"):
        NatureCNNAgent(4, 6, frame_size=35)


def test_conv_simple_agent_takes_frames_of_any_size_and_a_vector():
    """Sample Factory's convnet_simple: 72x128 Doom frames -> 128 x 3 x 6 after its three convolutions, a 512-unit
    layer; the measurements' 128-128 head joins it; without a vector the heads see the 512 features alone."""
    from rlfast.algos.nets import ConvSimpleAgent, conv_out

    assert conv_out((72, 128), ConvSimpleAgent.CONVS) == (3, 6)
    torch.manual_seed(0)
    agent = ConvSimpleAgent((3, 72, 128), 5, measurements=23)
    assert agent.network[7].in_features == 128 * 3 * 6 and agent.actor.in_features == 640
    obs = {"obs": torch.randint(0, 256, (4, 3, 72, 128), dtype=torch.uint8), "measurements": torch.rand(4, 23)}
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == logprob.shape == entropy.shape == value.shape == (4,)
    changed = {**obs, "measurements": obs["measurements"] + 1}
    assert not torch.allclose(agent.get_value(obs), agent.get_value(changed))  # the vector is an input
    assert agent.act(obs, greedy=True).shape == (4,)
    plain = ConvSimpleAgent((1, 48, 84), 3, frames_key="screen")
    assert plain.measurements is None and plain.actor.in_features == 512
    assert plain.get_value({"screen": torch.zeros(2, 1, 48, 84, dtype=torch.uint8)}).shape == (2,)
    multi = ConvSimpleAgent((3, 72, 128), (3, 2), measurements=23)  # MultiDiscrete([3, 2]): two heads
    assert multi.actor.out_features == 5
    action, logprob, _, _ = multi.get_action_and_value(obs)
    assert action.shape == (4, 2) and action.dtype == torch.float32 and logprob.shape == (4,)
    greedy = multi.act(obs, greedy=True)
    logits = multi.actor(multi.hidden(obs))
    assert torch.equal(greedy, torch.stack((logits[:, :3].argmax(1), logits[:, 3:].argmax(1)), 1).float())
    with pytest.raises(ValueError, match="frames of 30x84 are too small for convnet_simple"):
        ConvSimpleAgent((1, 30, 84), 3)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_recurrent_conv_simple_agent_unrolls_as_it_acts_step_by_step(cell):
    """Sample Factory's Doom network with its core: the heads read the core's 512 outputs; unrolling T steps of a
    Dict observation time-major gives what acting one step at a time gives with the state carried (zeroed at a
    start), (float32: to 1e-5, the matrix products of other shapes may round differently), and the greedy action of
    each MultiDiscrete head is the argmax of its logits on the core's output."""
    from rlfast.algos.nets import RecurrentConvSimpleAgent

    torch.manual_seed(0)
    agent = RecurrentConvSimpleAgent((3, 72, 128), (3, 2), measurements=23, cell=cell)
    assert agent.core.input_size == 640 and agent.core.hidden_size == 512
    assert agent.actor.in_features == agent.critic.in_features == 512 and agent.actor.out_features == 5
    T, N = 4, 2
    obs = {"obs": torch.randint(0, 256, (T * N, 3, 72, 128), dtype=torch.uint8),
           "measurements": torch.rand(T * N, 23)}  # fmt: skip
    starts = torch.zeros(T * N, dtype=torch.bool)
    starts[2 * N + 1] = True  # env 1 starts an episode at step 2
    state = agent.initial_state(N)
    assert state.shape == (N, 2 if cell == "lstm" else 1, 512)
    with torch.no_grad():
        actions, logprob, entropy, value, final = agent.get_action_and_value(obs, state, starts)
        assert actions.shape == (T * N, 2) and logprob.shape == entropy.shape == value.shape == (T * N,)
        carried = state
        for t in range(T):
            step = {k: v[t * N:(t + 1) * N] for k, v in obs.items()}
            _, lp, _, v, carried = agent.get_action_and_value(step, carried, starts[t * N:(t + 1) * N],
                                                              actions[t * N:(t + 1) * N])  # fmt: skip
            torch.testing.assert_close(lp, logprob[t * N:(t + 1) * N], rtol=0, atol=1e-5)
            torch.testing.assert_close(v, value[t * N:(t + 1) * N], rtol=0, atol=1e-5)
        torch.testing.assert_close(carried, final, rtol=0, atol=1e-5)
        unreset = agent.get_value(obs, state, torch.zeros_like(starts))
        assert not torch.allclose(unreset[2 * N + 1], value[2 * N + 1])  # the start zeroed env 1's state
        greedy, after = agent.act({k: v[:N] for k, v in obs.items()}, greedy=True)
        logits = agent.actor(agent.unroll({k: v[:N] for k, v in obs.items()}, state, starts[:N])[0])
        assert torch.equal(greedy, torch.stack((logits[:, :3].argmax(1), logits[:, 3:].argmax(1)), 1).float())
        assert after.shape == state.shape
