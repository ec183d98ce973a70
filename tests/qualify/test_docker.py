"""Qualification through the Docker runner: the probe and the throughput mode run in the workload's
image, so an image without torch is caught (could not run, exit 3) and one with it is measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine", "no_leftover_containers")]


def test_an_image_without_torch_cannot_run_the_probe_but_runs_the_throughput_mode(docker_cli, tmp_path: Path):
    r = docker_cli("qualify", "--runner", "docker", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json")
    assert r.code == 3, r.err
    record = json.loads(r.out)
    checks = {c["name"]: c for c in record["checks"]}
    assert checks["gemm"]["status"] == "inconclusive"
    assert "torch is not installed where the probe runs" in checks["gemm"]["reasons"][0]
    assert checks["throughput"]["status"] == "pass"  # fakebench's stdlib throughput mode, in its container
    assert record["software"]["image"].startswith("sha256:") and record["runner"] == "docker"


def test_in_a_torch_image_the_probe_measures(docker_cli, torch_base_image: str, tmp_path: Path):
    """The probe the image carries (``python -m workloads.common.probe``, copied with workloads/) runs in
    the container: every case's sanity checked apart from its number."""
    r = docker_cli("qualify", "--runner", "docker", "--base-image", torch_base_image, "--expect-gpus", "0",
                   "--results", str(tmp_path / "r"), "--node-name", "n1", "--json")
    assert r.code == 0, r.err  # a CPU node declared as one may PASS
    record = json.loads(r.out)
    checks = {c["name"]: c for c in record["checks"]}
    assert checks["gemm"]["status"] == "pass" and checks["gemm"]["measurements"]
    assert record["software"]["torch"].startswith("2.13.0")
    assert record["system"]["probe"]["device"] == "cpu" and record["system"]["probe"]["protocol"] == 2
    for name in ("gemm", "conv", "memory"):
        sanity = checks[name]["facts"]["sanity"]
        assert checks[name]["sanity"] == "pass" and sanity, name
        assert {m["metric"] for m in checks[name]["measurements"]} == set(sanity), name
    assert checks["gemm"]["facts"]["sanity"]["gemm_fp32_256x256x256"].startswith("max relative error")
