"""The kit's throughput mode parts (workloads/common/throughput.py): which DATADIR holds data, the
percentiles and the metadata of the final event, one definition for every workload
(resnet50 took the nearest rank for step_ms_p10/p90, unet3d interpolated)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workloads.common import throughput


def test_which_datadir_holds_data(tmp_path: Path):
    assert not throughput.holds_data(None) and not throughput.holds_data("")
    assert not throughput.holds_data(tmp_path)  # what a runner mounts at /data without a dataset
    assert throughput.holds_data(tmp_path / "missing")  # the workload then says it is missing
    (tmp_path / "train").mkdir()
    assert throughput.holds_data(tmp_path) and throughput.holds_data(str(tmp_path))


@pytest.mark.parametrize("values", [[5.0], [3.0, 1.0], list(np.random.default_rng(0).uniform(1, 9, 20)),
                                    list(range(7))])
@pytest.mark.parametrize("q", [0, 10, 50, 90, 100])
def test_percentiles_interpolate_as_numpy(values, q):
    assert throughput.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_a_percentile_of_nothing_is_refused():
    with pytest.raises(ValueError):
        throughput.percentile([], 50)


def test_the_metadata_of_the_final_event():
    meta = throughput.metadata(per_step_ms=[10.0, 20.0, 30.0, 40.0, 50.0], steps=5, warmup_steps=2, batch_size=4,
                               global_batch_size=8, rate=100.0, loader_rate=80.0, precision="bf16", device_name="H100")
    assert meta == {"unit": "samples/s", "steps": 5, "warmup_steps": 2, "batch_size": 4, "global_batch_size": 8,
                    "step_ms_median": 30.0, "step_ms_p10": 14.0, "step_ms_p90": 46.0,
                    "loader_samples_per_second": 80.0, "input_bound": True, "precision": "bf16",
                    "device_name": "H100"}
    untimed = throughput.metadata(per_step_ms=[1.0], steps=1, warmup_steps=0, batch_size=1, global_batch_size=1,
                                  rate=1.0, loader_rate=None, precision="fp32", device_name="cpu")
    assert untimed["input_bound"] is None and untimed["loader_samples_per_second"] is None
