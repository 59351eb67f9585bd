"""benchmarks/check_flush_denormals.py: the same gradient steps from a checkpoint, denormals kept and flushed."""

import torch


def test_runs_both_ways_from_the_same_state_and_reports_each_cnn_path(load_bench, load_script, tmp_path, capsys):
    check = load_bench("check_flush_denormals.py")
    dqn_atari = load_script("dqn_atari.py")
    torch.manual_seed(0)
    q, target = dqn_atari.QNetwork(6), dqn_atari.QNetwork(6)
    optimizer = torch.optim.Adam(q.parameters(), lr=1e-4, fused=True)
    q(torch.zeros(1, 4, 84, 84, dtype=torch.uint8)).sum().backward()
    optimizer.step()
    with torch.no_grad():  # a moment in the denormals, as a long run leaves them
        optimizer.state[q.network[7].weight]["exp_avg"][0, :10] = torch.finfo(torch.float32).tiny / 4
    path = tmp_path / "checkpoint.pt"
    torch.save({"models": {"agent": q.state_dict(), "target": target.state_dict()},
                "optimizers": {"optimizer": optimizer.state_dict()}, "args": {"learning_rate": 1e-4},
                "global_step": 1}, path)  # fmt: skip
    held = check.denormal_moments(optimizer.state_dict())
    threads = torch.get_num_threads()
    check.main(check.Args(checkpoint=str(path), steps=2, batch_size=4))
    assert torch.get_num_threads() == threads  # put back
    out = capsys.readouterr().out
    assert f"step 1, {held:,} of 3,374,412 Adam moments denormal" in out and held >= 10
    assert out.splitlines()[0].startswith(f"optimizer 'optimizer', step 1: {held:,} of 3,374,412 Adam moments")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[3:]}
    assert set(rows) == {"float32", "bf16"}
    for cnn, row in rows.items():
        assert row[2:4] == ["of", "1,687,206"] and int(row[7]) == 0, cnn  # flushed: no denormal moment left
        assert int(row[5].replace(",", "")) >= 10, cnn  # kept: still there


def test_times_adam_alone_for_any_trainers_checkpoint(load_bench, tmp_path, capsys):
    # a PPO-style checkpoint (no target network), one of whose parameters never had a gradient (no Adam state):
    # only the Adam step alone is timed, on the parameters that have a state
    check = load_bench("check_flush_denormals.py")
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 2))
    optimizer = torch.optim.Adam(net.parameters(), fused=True)
    net[1](torch.randn(4, 16)).sum().backward()  # the first layer gets no gradient, so no state
    optimizer.step()
    path = tmp_path / "checkpoint.pt"
    torch.save({"models": {"agent": net.state_dict()}, "optimizers": {"optimizer": optimizer.state_dict()},
                "global_step": 7}, path)  # fmt: skip
    check.main(check.Args(checkpoint=str(path)))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("optimizer 'optimizer', step 7: 0 of 68 Adam moments denormal")
    assert "ms kept" in lines[0] and "ms flushed (one thread)" in lines[0]
