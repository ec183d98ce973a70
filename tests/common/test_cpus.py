"""The kit's CPU count (workloads/common/cpus.py): the affinity mask capped by a cgroup v2 quota,
what every count of CPUs in the workloads starts from. unet3d's dataset command line counted the
affinity mask alone: in a container limited by a quota (docker --cpus) it started a worker per
host CPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workloads.common import cpus


@pytest.mark.parametrize(("text", "expected"), [("max 100000", None), ("150000 100000", 1.5), ("200000 100000\n", 2.0),
                                                ("garbage", None), ("-1 100000", None), ("100000 0", None)])
def test_a_cgroup_cpu_max_line(text, expected):
    assert cpus.cgroup_cpu_quota(text) == expected


def eight_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))


def test_usable_cpus_are_the_affinity_capped_by_the_quota(tmp_path: Path, monkeypatch):
    eight_cpus(monkeypatch)
    quota = tmp_path / "cpu.max"
    quota.write_text("100000 100000\n")
    assert cpus.usable_cpus(quota) == 1
    quota.write_text("250000 100000\n")  # 2.5 CPUs: two whole ones
    assert cpus.usable_cpus(quota) == 2
    quota.write_text("10000 100000\n")  # a tenth of a CPU still runs one thread
    assert cpus.usable_cpus(quota) == 1
    quota.write_text("max 100000\n")
    assert cpus.usable_cpus(quota) == 8
    assert cpus.usable_cpus(tmp_path / "absent") == 8


@pytest.mark.parametrize(("count", "processes", "expected"), [(2, 1, 2), (16, 4, 4), (3, 2, 1), (1, 8, 1), (16, 3, 5),
                                                              (4, 0, 4)])
def test_threads_per_process(count, processes, expected):
    assert cpus.threads_per_process(count, processes) == expected


def test_the_dataset_command_line_starts_as_many_workers_as_the_quota_allows(tmp_path: Path, monkeypatch):
    eight_cpus(monkeypatch)
    quota = tmp_path / "cpu.max"
    quota.write_text("100000 100000\n")
    monkeypatch.setattr(cpus, "CGROUP_CPU_MAX", quota)
    from workloads.unet3d.dataset import build_parser
    from workloads.unet3d.preprocess import PreprocessConfig
    from workloads.unet3d.synthesize import SynthesizeConfig

    parser = build_parser()
    for argv in (["preprocess", "raw", "out"], ["verify-raw", "raw"], ["prepare", "src", "--cache", "c"],
                 ["synthesize", "out"], ["generate-raw", "raw"]):
        assert parser.parse_args(argv).workers == 1, argv
    assert PreprocessConfig(raw_dir=tmp_path, out_dir=tmp_path).workers == 1
    assert SynthesizeConfig().workers == 1
