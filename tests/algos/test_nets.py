"""FrameNet's CPU speed options (channels-last, bf16 autocast) keep the network's math, keys and dtypes."""

import copy
import importlib.util
from pathlib import Path

import pytest
import torch

from rlfast.algos.nets import FrameNet, NatureCNNAgent, native_bf16, set_speed

ROOT = Path(__file__).resolve().parents[2]


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


def test_bf16_autocast_is_close_and_returns_float32():
    torch.manual_seed(0)
    agent, x, actions = NatureCNNAgent(4, 6), frames(), torch.randint(0, 6, (16,))
    fast = set_speed(copy.deepcopy(agent), bf16=True)
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


def test_native_bf16_follows_the_cpu_flags():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else None
    if flags is None:
        pytest.skip("no /proc/cpuinfo to compare with")
    has = " avx512_bf16" in flags or " amx_bf16" in flags
    assert native_bf16(torch.device("cpu")) == (has and torch.backends.mkldnn.is_available())
    assert native_bf16(torch.device("meta")) is False


def test_dqn_atari_q_network_takes_the_same_options():
    spec = importlib.util.spec_from_file_location("dqn_atari_for_test", ROOT / "scripts" / "dqn_atari.py")
    dqn_atari = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dqn_atari)
    torch.manual_seed(0)
    q, x = dqn_atari.QNetwork(6), frames(8)
    assert list(q.state_dict())[:2] == ["network.0.weight", "network.0.bias"]
    fast = set_speed(copy.deepcopy(q), channels_last=True)
    torch.testing.assert_close(fast(x), q(x), rtol=1e-5, atol=1e-6)
