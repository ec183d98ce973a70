"""What mltrain's inference harness costs: Offline samples/s and SingleStream p90 latency of
`workloads.inference` (the real LoadGen) against a bare ONNX Runtime loop over the same preprocessed
samples, and the MLPerf reference harness (``vision/classification_and_detection/python/main.py``,
from the mlcommons/inference mirror, run in a temporary folder) on the same ONNX model and images.

    python benchmarks/inference_overhead.py                      # CPU, 8 s tests, 2 rounds
    python benchmarks/inference_overhead.py --device cuda --seconds 20
    python benchmarks/inference_overhead.py --reference /path/to/inference/checkout

The model is the smoke model's trained weights (made on first use, as `mltrain infer resnet50
--profile smoke` makes them) exported at the reference's 224x224 input with the reference model's
outputs (``ArgMax:0``, ``softmax_tensor:0``), so that both harnesses run it with their resnet50
defaults; the images are the smoke data's 200 validation images. The bare loop runs as the harness
does: Offline from as many threads as the harness answers Offline queries with (2), each session
call with the intra-op threads the harness chooses (``intra_op_threads``: on the CPU, the usable
CPUs shared by the workers). The reference runs with its defaults (a worker thread per CPU, ONNX
Runtime's default threads in each call) and, in Offline, once more with one worker (``--threads 1``,
its best simple setting on a small CPU), both with the user.conf values mltrain's harness last chose.
Preprocessing is outside every timed region (LoadGen's QSL loads preprocessed samples; the bare
loop gets them made). Each round runs bare, mltrain and the reference in turn (the order reversed
every other round: a shared machine's load drifts); each ratio is taken within a round, and the
median of the rounds' ratios is reported with the geometric mean and its paired 95% interval (a
Student-t interval of the rounds' log ratios). Targets: mltrain Offline >= 0.95x bare, SingleStream p90
<= 1.05x bare, and at least as fast as the reference in both.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from orchestrator.config.locations import data_cache_dir
from orchestrator.inference.logs import performance
from orchestrator.insight.statistics import mean_interval
from workloads.common.cpus import usable_cpus
from workloads.inference.backends import EXECUTION_PROVIDERS
from workloads.inference.models.resnet50 import Model
from workloads.inference.run import Options, intra_op_threads
from workloads.inference.smoke import ReferenceInput
from workloads.resnet50 import config as train_config
from workloads.resnet50.model import ModelConfig, ResNet50

PROJECT = Path(__file__).resolve().parents[1]
MIRROR = Path("/work/.mirror/mlcommons+inference/repo")
REFERENCE_DIR = "vision/classification_and_detection/python"
BATCH = 32
WORKERS = 2
"""The harness's default threads answering Offline queries (workloads.inference --workers)."""


class ReferenceOutputs(nn.Module):
    """The smoke network with the reference resnet50 ONNX model's outputs: class ids (1001 classes,
    0 the background: hence +1) and the softmax."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # x: (B, 3, 224, 224)
        logits = self.model(x)  # (B, classes)
        return logits.argmax(dim=1) + 1, logits.softmax(dim=1)


def smoke_folder() -> Path:
    folder = data_cache_dir() / "inference" / "resnet50-smoke"
    if not (folder / "smoke.json").is_file():
        subprocess.run([sys.executable, "-m", "workloads.inference.dataset", "smoke", "resnet50", str(folder)],
                       check=True, cwd=PROJECT, stdout=subprocess.DEVNULL)
    return folder


def export_224(smoke: Path, out: Path) -> Path:
    preset = train_config.smoke()
    network = ResNet50(ModelConfig(num_classes=10, width=preset.width, layers=preset.layers))
    network.load_state_dict(torch.load(smoke / "weights.pt", map_location="cpu"))
    model = ReferenceOutputs(ReferenceInput(network)).eval()
    path = out / "resnet50_smoke_224.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, 3, 224, 224),), str(path), dynamo=False, opset_version=17,
                          input_names=["input_tensor:0"], output_names=["ArgMax:0", "softmax_tensor:0"],
                          dynamic_axes={"input_tensor:0": {0: "batch"}})
    return path


def harness_threads(scenario: str, device: str) -> int:
    """The intra-op threads the harness chooses for this scenario here (0: the backend's default)."""
    options = Options(model_name="resnet50", model=Path(), data=Path(), out=Path(), scenario=scenario, device=device,
                      workers=WORKERS)
    return intra_op_threads(options, usable_cpus(), os.cpu_count() or 1)[0]


def session(model: Path, device: str, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(model), sess_options=options, providers=EXECUTION_PROVIDERS[device])


def bare(model: Path, samples: np.ndarray, device: str, seconds: float, workers: int) -> tuple[float, float]:
    """(Offline samples/s over contiguous batches from ``workers`` threads, as many as the harness
    answers Offline queries with; SingleStream p90 latency in ns from one thread), each with the
    intra-op threads the harness chooses for the scenario."""
    import threading

    offline = session(model, device, harness_threads("Offline", device))
    name = offline.get_inputs()[0].name
    for _ in range(3):
        offline.run(None, {name: samples[:BATCH]})
    done = [0] * workers
    started = time.perf_counter()

    def loop(worker: int) -> None:
        while time.perf_counter() - started < seconds:
            for start in range(worker * BATCH, len(samples), workers * BATCH):
                offline.run(None, {name: samples[start:start + BATCH]})
                done[worker] += len(samples[start:start + BATCH])

    threads = [threading.Thread(target=loop, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = sum(done) / (time.perf_counter() - started)
    single = session(model, device, harness_threads("SingleStream", device))
    for _ in range(3):
        single.run(None, {name: samples[:1]})
    latencies: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for index in range(len(samples)):
            began = time.perf_counter_ns()
            single.run(None, {name: samples[index:index + 1]})
            latencies.append(time.perf_counter_ns() - began)
    return rate, float(np.percentile(latencies, 90))


def ours(model: Path, data: Path, out: Path, scenario: str, device: str, seconds: float, count: int,
         user_conf: dict[str, str]) -> tuple[float, dict[str, float]]:
    """The scenario's metric from LoadGen's detail log, and the user.conf values the harness chose."""
    target = ["--target-qps", user_conf.get("target_qps", "auto")] if scenario == "Offline" else \
        ["--target-latency-ms", user_conf.get("target_latency", "auto")]
    subprocess.run([sys.executable, "-m", "workloads.inference", "--model-name", "resnet50", "--model", str(model),
                    "--data", str(data), "--out", str(out), "--scenario", scenario, "--device", device, "--time",
                    f"{seconds:g}", "--count", str(count), "--max-batch", str(BATCH), *target],
                   check=True, cwd=PROJECT, stderr=subprocess.DEVNULL)
    import json

    chosen = json.loads((out / "harness.json").read_text())["user_conf"]
    return float(performance(out / "performance" / "run_1", scenario).value), chosen


def reference(checkout: Path, model: Path, data: Path, work: Path, scenario: str, device: str, seconds: float,
              count: int, user_conf: dict[str, float], workers: int | None = None) -> float:
    """The reference's main.py with its resnet50-onnxruntime profile and the same user.conf values;
    ``workers``: its --threads (default: one worker per CPU)."""
    code = work / "python"
    if not code.is_dir():
        code.mkdir(parents=True)
        if (checkout / ".git").exists() or (checkout / "HEAD").exists():
            names = subprocess.run(["git", "-C", str(checkout), "ls-tree", "--name-only", f"HEAD:{REFERENCE_DIR}"],
                                   check=True, capture_output=True, text=True).stdout.split()
            for name in names:
                if name.endswith(".py"):
                    text = subprocess.run(["git", "-C", str(checkout), "show", f"HEAD:{REFERENCE_DIR}/{name}"],
                                          check=True, capture_output=True, text=True).stdout
                    (code / name).write_text(text)
        else:
            for source in (checkout / REFERENCE_DIR).glob("*.py"):
                (code / source.name).write_text(source.read_text())
    out = work / f"reference-{scenario}-{time.monotonic_ns()}"
    out.mkdir()
    conf = out / "user.conf"
    conf.write_text("".join(f"resnet50.{scenario}.{k} = {v:g}\n" for k, v in user_conf.items()))
    env = {**os.environ, "USE_GPU": "yes" if device != "cpu" else "no"}
    subprocess.run([sys.executable, "main.py", "--profile", "resnet50-onnxruntime", "--model", str(model),
                    "--dataset-path", str(data), "--output", str(out), "--scenario", scenario, "--time",
                    f"{int(round(seconds))}", "--count", str(count), "--max-batchsize", str(BATCH), "--user_conf",
                    str(conf), "--cache_dir", str(work / "cache"),
                    *(["--threads", str(workers)] if workers else [])],
                   check=True, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return float(performance(out, scenario).value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="duration of each test")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda", "tensorrt"), default="cpu")
    parser.add_argument("--reference", type=Path, default=MIRROR, help="mlcommons/inference checkout or mirror")
    args = parser.parse_args()
    import onnxruntime

    wanted = EXECUTION_PROVIDERS[args.device][0]
    if wanted not in onnxruntime.get_available_providers():  # the bare loop would fall back to the CPU unsaid
        sys.exit(f"inference_overhead: ONNX Runtime {onnxruntime.__version__} here has no {wanted} (it has "
                 f"{', '.join(onnxruntime.get_available_providers())}): install onnxruntime-gpu, or use --device cpu")
    smoke = smoke_folder()
    data = smoke / "data"
    with tempfile.TemporaryDirectory(prefix="mltrain-inference-bench-") as scratch:
        work = Path(scratch)
        model = export_224(smoke, work)
        dataset = Model(data, count=None)
        samples = np.stack([dataset.load(i) for i in range(dataset.count)])
        rows: dict[str, list[float]] = {key: [] for key in ("bare_off", "ours_off", "ref_off", "ref1_off",
                                                              "bare_p90", "ours_p90", "ref_p90")}
        chosen: dict[str, dict[str, float]] = {}
        """The user.conf values mltrain's harness chose (auto) last, given to the reference."""
        for number in range(args.rounds):
            # the three in turn, the order reversed every other round (a shared machine's load drifts)
            steps = ["bare", "ours", "ref"] if number % 2 == 0 else ["ref", "ours", "bare"]
            for step in steps:
                if step == "bare":
                    rate, p90 = bare(model, samples, args.device, args.seconds, WORKERS)
                    rows["bare_off"].append(rate)
                    rows["bare_p90"].append(p90)
                elif step == "ours":
                    for scenario, key in (("Offline", "ours_off"), ("SingleStream", "ours_p90")):
                        value, chosen[scenario] = ours(model, data, work / f"ours-{scenario}-{number}", scenario,
                                                       args.device, args.seconds, dataset.count, {})
                        rows[key].append(value)
                else:
                    for scenario, key, workers in (("Offline", "ref_off", None), ("Offline", "ref1_off", 1),
                                                   ("SingleStream", "ref_p90", None)):
                        rows[key].append(reference(args.reference, model, data, work, scenario, args.device,
                                                   args.seconds, dataset.count, chosen[scenario], workers))
            print(f"round {number + 1} ({' '.join(steps)}): "
                  + ", ".join(f"{k} {v[-1]:.4g}" for k, v in rows.items()), flush=True)
    def per_round(ours_key: str, other_key: str) -> list[float]:
        return [o / r for o, r in zip(rows[ours_key], rows[other_key], strict=True)]

    ratios = {
        "mltrain / bare, Offline samples/s": (per_round("ours_off", "bare_off"), ">= 0.95"),
        "mltrain / bare, SingleStream p90": (per_round("ours_p90", "bare_p90"), "<= 1.05"),
        "mltrain / reference, Offline samples/s": (per_round("ours_off", "ref_off"), ">= 1"),
        "mltrain / reference --threads 1, Offline": (per_round("ours_off", "ref1_off"), "none (its best here)"),
        "mltrain / reference, SingleStream p90": (per_round("ours_p90", "ref_p90"), "<= 1"),
    }
    med = {key: statistics.median(values) for key, values in rows.items()}
    threads = harness_threads("Offline", args.device)
    print(f"\ndevice {args.device}, {args.seconds:g} s tests, {args.rounds} rounds, {dataset.count} images at"
          f" 224x224, batch {BATCH}, {WORKERS} Offline threads of {threads or 'default'} intra-op thread(s) each,"
          f" onnxruntime {onnxruntime.__version__}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"Offline samples/s (medians):    bare {med['bare_off']:.1f}  mltrain {med['ours_off']:.1f}  "
          f"reference {med['ref_off']:.1f}  reference --threads 1 {med['ref1_off']:.1f}")
    print(f"SingleStream p90 ms (medians):  bare {med['bare_p90'] / 1e6:.3f}  mltrain {med['ours_p90'] / 1e6:.3f}  "
          f"reference {med['ref_p90'] / 1e6:.3f}")
    for name, (values, target) in ratios.items():
        each = " ".join(f"{v:.3f}" for v in values)
        interval = mean_interval([math.log(v) for v in values])
        spread = f" [{math.exp(interval.low):.3f}, {math.exp(interval.high):.3f}]" if interval.low is not None else ""
        print(f"{name:42s} median {statistics.median(values):.3f}, geometric mean {math.exp(interval.value or 0):.3f}"
              f"{spread} (rounds: {each})  target {target}")


if __name__ == "__main__":
    main()
