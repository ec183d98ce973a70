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
