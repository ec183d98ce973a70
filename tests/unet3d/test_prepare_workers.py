"""`prepare SRC --cache DIR` starts worker processes only for raw data large enough to pay for them: each
first imports numpy, scipy and torch (before: 40 smoke cases of 24^3 with 2 workers took 17.4 CPU
seconds, in one process 3.4)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import workloads.unet3d.parallel
from workloads.unet3d.dataset import main
from workloads.unet3d.parallel import BYTES_PER_WORKER, workers_for
from workloads.unet3d.prepare import prepare
from workloads.unet3d.synthesize import VOXELS_PER_WORKER, SynthesizeConfig, _useful_workers
from workloads.unet3d.synthetic import parse_size


def test_a_small_raw_set_is_prepared_without_starting_a_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert main(["generate-raw", str(tmp_path / "raw"), "--cases", "4", "--seed", "5", "--size", "tiny",
                 "--workers", "1"]) == 0

    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(workloads.unet3d.parallel, "ProcessPoolExecutor", no_pool)
    made = prepare(tmp_path / "raw", tmp_path / "cache", min_shape=16, workers=4)
    assert made.made and len(list(made.folder.glob("case_*_x.npy"))) == 4


def test_one_worker_per_share_of_raw_bytes(tmp_path: Path):
    big = []
    for n in range(3):  # sparse files: sizes without the bytes
        with (tmp_path / f"big{n}.nii.gz").open("wb") as handle:
            handle.truncate(BYTES_PER_WORKER)
        big.append(tmp_path / f"big{n}.nii.gz")
    assert [workers_for(big[:k], 8) for k in (1, 2, 3)] == [1, 2, 3]
    assert workers_for(big, 2) == 2 and workers_for([], 8) == 1
    assert workers_for([*big, tmp_path / "missing.nii.gz"], 8) == 3  # its own check names what is missing


def test_synthesis_starts_workers_by_the_same_rule_in_voxels():
    small = SynthesizeConfig(cases=4, size="tiny", seed=1, workers=8)
    voxels = math.prod(parse_size("tiny").preprocessed_shape) * 4
    assert voxels < VOXELS_PER_WORKER and _useful_workers(small) == 1
    per_case = math.prod(parse_size("small").preprocessed_shape)
    cases = 3 * VOXELS_PER_WORKER // per_case + 1
    assert _useful_workers(SynthesizeConfig(cases=cases, size="small", seed=1, workers=8)) == 3
    assert _useful_workers(SynthesizeConfig(cases=cases, size="small", seed=1, workers=2)) == 2
