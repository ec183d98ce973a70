"""The parts of `mltrain infer` that need no LoadGen run: the Server search's bracket and bisection,
COCO mAP through pycocotools on a made-up annotation file, the detection datasets' layout checks,
and the harness's declaration agreeing with its per-model modules."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from orchestrator.config.locations import workloads_dir
from orchestrator.inference.declaration import find_model, load_harness
from orchestrator.inference.search import best_trial, search
from orchestrator.results.inference import SearchTrial
from workloads.inference.errors import HarnessError
from workloads.inference.models import find, retinanet, ssd_resnet34
from workloads.inference.models.detection import mean_average_precision


def trials_against(limit: float, first: float):
    """A trial function whose run is VALID at or below ``limit`` QPS."""
    asked: list[float] = []

    def trial(number: int, qps: float | None) -> SearchTrial:
        qps = first if qps is None else qps
        asked.append(qps)
        return SearchTrial(number=number, target_qps=qps, valid=qps <= limit, passed=qps <= limit,
                           folder=f"search/trial_{number}")

    return trial, asked


@pytest.mark.parametrize(("limit", "first"), [(730.0, 100.0), (730.0, 5000.0), (50.0, 50.0)])
def test_search_brackets_then_bisects_to_the_highest_valid_qps(limit: float, first: float):
    trial, asked = trials_against(limit, first)
    found = search(trial, precision=0.05)
    assert found.best_qps is not None and found.best_qps <= limit
    invalid_above = [t.target_qps for t in found.trials if not t.passed and t.target_qps > found.best_qps]
    assert invalid_above and min(invalid_above) - found.best_qps <= 0.05 * found.best_qps
    assert [t.number for t in found.trials] == list(range(1, len(asked) + 1))
    assert best_trial(found).target_qps == found.best_qps


def test_search_with_no_valid_trial_says_none_within_its_trial_budget():
    trial, asked = trials_against(0.0, 100.0)
    found = search(trial, max_trials=6)
    assert found.best_qps is None and len(found.trials) == 6 and not best_trial(found).passed


def coco_folder(root: Path, images: int = 3) -> Path:
    """A COCO-format annotation file, its images under val2017/, one box per image."""
    (root / "val2017").mkdir(parents=True)
    (root / "annotations").mkdir()
    entries, annotations = [], []
    for k in range(images):
        Image.fromarray(np.zeros((100, 200, 3), dtype=np.uint8)).save(root / "val2017" / f"{k}.jpg")
        entries.append({"id": 10 + k, "file_name": f"{k}.jpg", "height": 100, "width": 200})
        annotations.append({"id": k + 1, "image_id": 10 + k, "category_id": 3 if k % 2 else 7, "iscrowd": 0,
                            "bbox": [20.0 + k, 10.0, 100.0, 50.0], "area": 5000.0})
    categories = [{"id": 3, "name": "car"}, {"id": 7, "name": "train"}]
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps(
        {"images": entries, "annotations": annotations, "categories": categories}))
    return root


def response(index: int, box: list[float], label: int) -> bytes:
    """The reference's payload: index, ymin, xmin, ymax, xmax (normalised), score, class."""
    x, y, w, h = box
    return np.array([index, y / 100, x / 200, (y + h) / 100, (x + w) / 200, 0.9, label], np.float32).tobytes()


def test_coco_map_of_exact_boxes_is_100_and_of_wrong_classes_0(tmp_path: Path):
    folder = coco_folder(tmp_path / "coco")
    model = ssd_resnet34.Model(folder, count=None)
    truth = json.loads((folder / "annotations" / "instances_val2017.json").read_text())["annotations"]
    inverse = {3: 1, 7: 2}  # the ONNX model's labels 1..80 are COCO's categories in order
    exact = [(k, response(k, a["bbox"], inverse[a["category_id"]])) for k, a in enumerate(truth)]
    assert model.accuracy(exact).percent == pytest.approx(100.0)
    wrong = [(k, response(k, a["bbox"], 3 - inverse[a["category_id"]])) for k, a in enumerate(truth)]
    assert mean_average_precision(model.annotation_file, model.images, wrong, inverse_map=True).percent == 0.0


def test_detection_layouts_are_checked_with_one_line_naming_the_file(tmp_path: Path):
    with pytest.raises(HarnessError, match="openimages-mlperf.json: missing annotation file"):
        retinanet.check(tmp_path)
    folder = coco_folder(tmp_path / "coco")
    (folder / "val2017" / "0.jpg").unlink()
    with pytest.raises(HarnessError, match=r"0.jpg: missing image"):
        ssd_resnet34.check(folder)


DECLARED = list(load_harness(workloads_dir() / "inference").models)
"""The models the harness declares: what every per-model test here runs over."""


@pytest.mark.parametrize("model", DECLARED)
def test_the_declaration_agrees_with_the_model_modules(model: str):
    from workloads.inference.kits19.preprocess import ROI_SHAPE
    from workloads.inference.models import declared, smoke_maker

    harness = find_model([workloads_dir()], model)
    facts = harness.model(model)
    module = find(model)
    window = getattr(module, "IMAGE_SIZE", ROI_SHAPE)  # an image's side, or the volume's window
    assert tuple(facts.input.shape[1:]) == window and model == module.CONF_MODEL
    assert set(harness.models) == set(declared()) and declared()[model].module == facts.module
    if facts.smoke is None:
        with pytest.raises(HarnessError, match=f"{model} has no smoke model"):
            smoke_maker(model)
    else:
        assert callable(smoke_maker(model).make)


def test_the_readme_lists_the_declared_models():
    """README's inference section names the models inference.yaml declares, in its order."""
    readme = (workloads_dir().parent / "README.md").read_text()
    listed = readme.split("`mltrain infer MODEL` runs one MLPerf Inference model (", 1)[1].split(")", 1)[0]
    assert listed == ", ".join(f"`{model}`" for model in DECLARED)


@pytest.mark.parametrize(("scenario", "device", "given", "cpus", "host", "chosen", "why"), [
    ("Offline", "cpu", 0, 2, 2, 1, "auto: 2 usable CPUs shared by 2 workers"),
    ("Server", "cpu", 0, 16, 64, 8, "auto: 16 usable CPUs shared by 2 workers"),
    ("Offline", "cpu", 0, 1, 1, 1, "auto: 1 usable CPU shared by 2 workers"),
    ("SingleStream", "cpu", 0, 2, 2, 0, "the backend's default (one call at a time)"),
    ("MultiStream", "cpu", 0, 4, 32, 4, "auto: the 4 CPUs this process may use (of 32)"),
    ("Offline", "cuda", 0, 2, 2, 0, "the backend's default (the model runs on the device)"),
    ("Offline", "cpu", 3, 2, 4, 3, "given"),
])
def test_intra_op_threads_never_oversubscribe_the_cpus_the_process_may_use(
        scenario: str, device: str, given: int, cpus: int, host: int, chosen: int, why: str):
    from workloads.inference.run import Options, intra_op_threads

    options = Options(model_name="resnet50", model=Path("m.onnx"), data=Path("d"), out=Path("o"), scenario=scenario,
                      device=device, threads=given, workers=2)
    assert intra_op_threads(options, cpus, host, 2) == (chosen, why)


def test_one_worker_gets_every_usable_cpu():
    from workloads.inference.run import Options, intra_op_threads

    options = Options(model_name="3d-unet", model=Path("m.onnx"), data=Path("d"), out=Path("o"), scenario="Offline")
    assert intra_op_threads(options, 2, 2, 1) == (2, "auto: 2 usable CPUs shared by 1 worker")


@pytest.mark.parametrize(("scenario", "device", "per_sample", "given", "chosen", "why"), [
    ("Offline", "cpu", True, 0, 1, "auto: one worker, a whole volume at a time on the 2 usable CPUs, as the reference"
                                   " runs it (a second holds a second volume: --workers 2)"),
    ("Server", "cpu", True, 0, 1, "auto: one worker, a whole volume at a time on the 2 usable CPUs, as the reference"
                                  " runs it (a second holds a second volume: --workers 2)"),
    ("Server", "cpu", False, 0, 2, "auto: two workers in flight, backend calls (2 usable CPUs)"),
    ("Offline", "cuda", True, 0, 2, "auto: two workers in flight, backend calls (2 usable CPUs)"),
    ("SingleStream", "cpu", True, 0, 1, "LoadGen's thread answers each query"),
    ("Offline", "cpu", True, 1, 1, "given"),
])
def test_workers_are_chosen_and_say_why(scenario: str, device: str, per_sample: bool, given: int, chosen: int,
                                        why: str):
    """The record says how many workers ran and why: on the CPU a model that answers a whole volume
    per sample runs one, as the reference does (a second held 1.6x the reference's peak memory for
    3-8% more samples/s), and says how to run two."""
    from workloads.inference.run import Options, worker_count

    options = Options(model_name="3d-unet", model=Path("m.onnx"), data=Path("d"), out=Path("o"), scenario=scenario,
                      device=device, workers=given)
    assert worker_count(options, per_sample=per_sample, cpus=2) == (chosen, why)


@pytest.mark.parametrize("threads", [-1, 3, 100_000])
def test_threads_beyond_the_machine_s_cpus_are_refused_with_one_line(threads: int):
    """Each thread has its stack: 100,000 intra-op threads grew the harness to 6 GB."""
    from workloads.inference.run import Options, intra_op_threads

    options = Options(model_name="resnet50", model=Path("m.onnx"), data=Path("d"), out=Path("o"), scenario="Offline",
                      threads=threads)
    with pytest.raises(HarnessError, match=rf"^--threads {threads}: give 0 \(chosen for you\) to 2, the CPUs of this"):
        intra_op_threads(options, 2, 2, 2)


def _null_test(scenario: str, qps: float, duration_ms: int) -> tuple[int, object]:
    """(samples LoadGen issued, the harness's `settings.schedule`) for one test against a SUT that
    answers at once, LoadGen's own settings otherwise."""
    import os
    import tempfile

    import mlperf_loadgen as lg

    from workloads.inference import settings as lg_settings

    issued: list[int] = []

    def issue(queries) -> None:
        issued.append(len(queries))
        lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0) for q in queries])

    settings = lg.TestSettings()
    settings.FromConfig("", "resnet50", scenario, 0)
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.PerformanceOnly
    settings.offline_expected_qps = settings.server_target_qps = qps
    settings.min_duration_ms = settings.max_duration_ms = duration_ms
    settings.min_query_count = 1
    plan = lg_settings.schedule(settings, scenario)
    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(8, 8, lambda indices: None, lambda indices: None)
    with tempfile.TemporaryDirectory() as folder:
        log = lg.LogSettings()
        log.log_output.outdir = folder
        os.makedirs(folder, exist_ok=True)
        lg.StartTestWithLogSettings(sut, qsl, settings, log)
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    return sum(issued), plan


def test_the_schedule_the_harness_bounds_is_the_one_loadgen_makes():
    """Offline's one query holds what the harness planned for, exactly; Server issues about target x
    duration queries (Poisson arrivals): the memory bound counts what LoadGen really holds."""
    issued, plan = _null_test("Offline", 5000, 200)
    assert issued == plan.samples == 1100
    issued, plan = _null_test("Server", 1000, 300)
    assert plan.samples == 300 and 0.8 * plan.samples <= issued <= 1.2 * plan.samples


def test_a_schedule_beyond_the_machine_is_refused_with_the_range_that_fits():
    from workloads.inference import settings as lg_settings

    plan = lg_settings.Schedule(scenario="Offline", qps=1e7, queries=1, samples=int(1.1 * 600 * 1e7), per_query=1,
                                planned_s=600, min_s=600)
    available = 16 * 2**30
    assert not lg_settings.fits(plan, available) and lg_settings.fits(plan, None) is True
    high = lg_settings.highest_qps(plan, available)
    fitting = lg_settings.Schedule(scenario="Offline", qps=high, queries=1, samples=int(1.1 * 600 * high), per_query=1,
                                   planned_s=600, min_s=600)
    assert lg_settings.fits(fitting, available) and high > 10_000
    forever = lg_settings.Schedule(scenario="Server", qps=1e-9, queries=100, samples=100, per_query=1,
                                   planned_s=1e11, min_s=60)
    assert not lg_settings.fits(forever, None) and lg_settings.lowest_qps(forever) == 0.001  # the lowest taken


def test_a_detection_accuracy_line_without_total_counts_the_samples_the_harness_scored(tmp_path: Path):
    from orchestrator.inference.logs import accuracy

    facts = find_model([workloads_dir()], "retinanet").model("retinanet")
    (tmp_path / "accuracy.txt").write_text("mAP=37.551%\n")  # the reference script's line, as it prints it
    scored = accuracy(tmp_path, facts, harness_facts={"accuracy": {"samples": 24781, "line": "mAP=37.551%"}})
    assert scored.samples == 24781 and scored.percent == pytest.approx(37.551)
    assert accuracy(tmp_path, facts).samples == 0  # no count anywhere: none claimed


def test_the_gpu_extra_brings_the_cuda_execution_provider_and_the_image_3d_unets_readers():
    import tomllib

    from orchestrator.config.locations import python_root

    project = tomllib.loads((python_root() / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(spec.startswith("onnxruntime-gpu") for spec in extras["gpu"])  # --device cuda without a hand install
    assert any(spec.startswith("nibabel") for spec in extras["inference"])
    dockerfile = (python_root() / "docker" / "inference.Dockerfile").read_text()
    assert '"nibabel>=5"' in dockerfile and '"scipy>=' in dockerfile


def test_a_comparison_names_each_harness_setting_that_differs_between_or_within_setups():
    from types import SimpleNamespace

    from orchestrator.inference.compare import setting_differences

    def setup(name: str, **settings: str) -> SimpleNamespace:
        base = {"backend": "onnxruntime on CPUExecutionProvider", "batch": "up to 32", "threads": "1 (auto)",
                "workers": "2"}
        return SimpleNamespace(name=name, settings={**base, **settings})

    assert setting_differences([setup("a"), setup("b")]) == ()
    assert setting_differences([setup("a"), setup("b", threads="8 (auto)", workers="4")]) == (
        "threads differs: a 1 (auto); b 8 (auto)", "workers differs: a 2; b 4")
    assert setting_differences([setup("a", batch="up to 1 / up to 32"), setup("b", batch="up to 1 / up to 32")]) == (
        "batch differs within a, b: up to 1 / up to 32",)
