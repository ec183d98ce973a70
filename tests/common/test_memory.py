"""The kit's memory figure (workloads/common/memory.py): the host's MemAvailable capped by a cgroup v2
limit's headroom, what the inference harness sizes LoadGen's schedule and a batch against."""

from __future__ import annotations

from pathlib import Path

from workloads.common import memory

MEMINFO = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"


def test_the_host_figure_is_meminfo_available():
    assert memory.meminfo_available(MEMINFO) == 20000000 * 1024
    assert memory.meminfo_available("MemTotal: 1 kB\n") is None


def test_a_cgroup_limit_caps_it_by_its_headroom(tmp_path: Path):
    meminfo, cgroup = tmp_path / "meminfo", tmp_path / "cgroup"
    meminfo.write_text(MEMINFO)
    cgroup.mkdir()
    assert memory.available_bytes(meminfo, cgroup) == 20000000 * 1024  # no cgroup files: the host's
    (cgroup / "memory.max").write_text("max\n")
    (cgroup / "memory.current").write_text("123\n")
    assert memory.available_bytes(meminfo, cgroup) == 20000000 * 1024
    (cgroup / "memory.max").write_text(f"{4 * 2**30}\n")
    (cgroup / "memory.current").write_text(f"{2**30}\n")
    assert memory.available_bytes(meminfo, cgroup) == 3 * 2**30
    assert memory.available_bytes(tmp_path / "none", tmp_path / "none") is None
