"""The live table's epoch: epochs, whether the seed's log counts epochs or samples."""

from __future__ import annotations

from orchestrator.session.seed import SeedProgress

from .mllog_lines import line


def progress_after(lines: list[str]) -> SeedProgress:
    progress = SeedProgress(seed=1)
    for one in lines:
        progress.observe("0: " + one)
    return progress


def test_samples_counted_epoch_numbers_are_shown_as_epochs():
    lines = [line("train_samples", 1, 168), line("samples_per_epoch", 1, 160),
             line("block_start", 2, first_epoch_num=160, epoch_count=160), line("epoch_start", 2, epoch_num=160),
             line("epoch_stop", 3, epoch_num=160), line("epoch_start", 4, epoch_num=320)]
    progress = progress_after(lines)
    assert progress.epoch == 2 and progress.in_samples


def test_epoch_counted_logs_are_left_alone():
    lines = [line("train_samples", 1, 6), line("samples_per_epoch", 1, 6),
             *(line("epoch_start", 2 + e, epoch_num=e) for e in range(1, 13))]
    progress = progress_after(lines)
    assert progress.epoch == 12 and progress.in_samples is False
    assert progress_after([line("epoch_start", 2, epoch_num=336)]).epoch == 336  # no epoch size logged


# ---------------------------------------------------------------- without a terminal (issue 27)


def test_without_a_terminal_a_running_seed_speaks_every_interval():
    from orchestrator.commands.run import Heartbeat
    from orchestrator.session.loop import Watch

    now = [100.0]
    said: list[str] = []
    watch = Watch(seeds={3: SeedProgress(seed=3, state="running", started=100.0), 4: SeedProgress(seed=4)})
    beat = Heartbeat(said.append, watch, metric="eval_accuracy", target=0.908, every_s=20.0, clock=lambda: now[0])
    for t in (100.0, 110.0, 119.9):
        now[0] = t
        beat.tick()
    assert said == []
    now[0] = 120.0
    beat.tick()
    assert said == ["seed 3: running 20 s, no epoch logged yet, no eval_accuracy yet (target 0.908)"]
    watch.seeds[3].epoch, watch.seeds[3].accuracy = 12.0, 0.6123
    for t in (130.0, 139.0, 140.0, 150.0, 160.0):
        now[0] = t
        beat.tick()
    assert said[1:] == ["seed 3: running 40 s, epoch 12, eval_accuracy 0.6123 (target 0.908)",
                        "seed 3: running 60 s, epoch 12, eval_accuracy 0.6123 (target 0.908)"]
    watch.seeds[3].state, watch.seeds[3].status, watch.seeds[3].ended = "finished", "converged", 170.0
    beat.tick()
    beat.tick()
    assert said[3:] == ["seed 3: converged; the job took 70.0 s wall clock (start to exit: not its time-to-train,"
                        " run_start to run_stop)"]  # once, saying which time it is


def test_under_nohup_the_run_prints_progress_lines(cli_process, tmp_path):
    env = {"MLTRAIN_PROGRESS_S": "0.5", "FAKE_SLEEP_S": "0.25", "FAKE_EPOCH_MS": "250", "FAKE_BASE_EPOCHS": "6"}
    proc = cli_process("run", "fakebench", "--profile", "smoke", "--seeds", "1", "--results", str(tmp_path / "r"),
                       extra_env=env)
    _, err = proc.communicate(timeout=120)
    lines = [one for one in err.splitlines() if one.startswith("seed 1: running")]
    assert len(lines) >= 2 and "epoch " in lines[-1] and "eval_accuracy 0." in lines[-1] and "(target 0.5)" in lines[-1]
    assert "seed 1: converged; the job took" in err


def test_a_progress_interval_that_is_not_a_number_is_refused(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("MLTRAIN_PROGRESS_S", "often")
    r = cli("run", "fakebench", "--profile", "smoke", "--results", str(tmp_path / "r"))
    assert r.code == 2 and "MLTRAIN_PROGRESS_S='often'" in r.err and not (tmp_path / "r").exists()
