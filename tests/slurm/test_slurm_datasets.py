"""Dataset commands on a Slurm node (`srun`), for `--runner slurm`."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.results.store import Store

pytestmark = pytest.mark.slurm


def test_raw_data_is_prepared_on_a_node(cli, slurm_env, tmp_path: Path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "raw.txt").write_text("raw for the node")
    results = tmp_path / "results"
    r = cli("run", "fakebench", "--runner", "slurm", "--seeds", "1-3", "--data", str(raw), "--results", str(results))
    assert r.code == 0, r.err
    (run_id,) = [p.name for p in results.iterdir() if p.is_dir()]
    manifest = Store(results).open(run_id).manifest
    assert manifest.runner_provenance["dataset"]["prepared_where"] == "on a Slurm node"
    assert (Path(manifest.data_dir) / "cases.json").read_text().endswith('"from": "raw for the node"}')
