"""Folders in MLCommons' published layout, made for the tests:

    <root>/results/<system>/<benchmark>/result_<n>.txt  (+ scaling.json)
    <root>/systems/<system>.json

unet3d logs are written the way NVIDIA's implementation writes them (epochs counted in samples:
``first_epoch_num``/``epoch_count`` of blocks and ``epoch_num`` of evals in samples, ``train_samples``
168, a ``:::SYSJSON`` line first); resnet logs count epochs. Both pass mlperf_logging's 4.0.0
closed-division compliance checker unless asked to break a rule. Times are whole milliseconds,
known in advance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

T0 = 1_714_043_552_170
SAMPLES = 168


def _line(key: str, time_ms: float, value=None, event: str = "POINT_IN_TIME", **metadata) -> str:
    record = {"namespace": "", "time_ms": time_ms, "event_type": event, "key": key, "value": value,
              "metadata": {"file": "/workspace/main.py", "lineno": 10, **metadata}}
    return ":::MLLOG " + json.dumps(record)


@dataclass(frozen=True)
class Run:
    """One run: epochs to the target, milliseconds per epoch, and how it ends."""

    epochs: int
    epoch_ms: int
    converged: bool = True
    break_rule: str | None = None
    """'eval_samples' (a CHECK fails), 'duplicate_run_start', 'nan_time', ... see the writers."""
    seed: int = 1


def _header(benchmark: str, seed: int, division: str = "closed") -> list[tuple]:
    return [
        ("cache_clear", True), ("init_start", None), ("submission_benchmark", benchmark),
        ("submission_org", "TestOrg"), ("submission_division", division), ("submission_status", "onprem"),
        ("submission_platform", "8xTest"), ("seed", seed),
    ]


def unet3d_log(run: Run, *, gbs: int = 56, block_epochs: int = 100, start_eval: int = 1000, in_samples: bool = True,
               division: str = "closed") -> str:
    """An NVIDIA-style unet3d log: reaches 0.908 at epoch ``run.epochs`` (a multiple of
    ``block_epochs``), or stops aborted after it without reaching it. ``in_samples=False``: epoch
    numbers count epochs, as the reference implementation logs them."""
    unit = SAMPLES if in_samples else 1
    t = T0 + run.seed  # distinct clocks per run
    lines = [":::SYSJSON {\"submitter\":\"TestOrg\",\"division\":\"closed\"}"]
    for key, value in _header("unet3d", run.seed, division):
        lines.append(_line(key, t, value))
    hyper = [("opt_name", "nag"), ("opt_base_learning_rate", 2.0), ("opt_learning_rate_warmup_epochs", 1000),
             ("opt_learning_rate_decay_boundary_epochs", []), ("opt_learning_rate_decay_factor", 1.0),
             ("opt_weight_decay", 0.0), ("opt_momentum", 0.9), ("oversampling", 0.4),
             ("training_input_shape", [128, 128, 128]), ("validation_input_shape", [128, 128, 128]),
             ("validation_overlap", 0.5)]
    lines += [_line(k, t + 10, v) for k, v in hyper]
    t += 7_000
    lines.append(_line("init_stop", t, event="INTERVAL_END"))
    lines.append(_line("run_start", t, event="INTERVAL_START"))
    if run.break_rule == "duplicate_run_start":
        lines.append(_line("run_start", t + 26_200, event="INTERVAL_START"))
    run_start = t
    eval_samples = 43 if run.break_rule == "eval_samples" else 42
    lines += [_line("train_samples", t + 2, SAMPLES), _line("eval_samples", t + 2, eval_samples),
              _line("global_batch_size", t + 3, gbs), _line("gradient_accumulation_steps", t + 3, 1),
              _line("samples_per_epoch", t + 3, SAMPLES)]
    epoch = 0
    while epoch < run.epochs:
        first = epoch * unit if epoch else unit
        lines.append(_line("block_start", t, event="INTERVAL_START", first_epoch_num=first,
                           epoch_count=block_epochs * unit))
        t += block_epochs * run.epoch_ms
        epoch += block_epochs
        lines.append(_line("block_stop", t, event="INTERVAL_END", first_epoch_num=first,
                           epoch_count=block_epochs * unit))
        if epoch >= start_eval:
            samples = epoch * unit
            accuracy = 0.9091 if epoch >= run.epochs and run.converged else 0.85
            epoch_value: object = "late" if run.break_rule == "text_epoch" else samples
            lines.append(_line("eval_start", t, samples, event="INTERVAL_START", epoch_num=samples))
            lines.append(_line("eval_accuracy", t + 1, accuracy, epoch_num=epoch_value))
            lines.append(_line("eval_stop", t + 1, samples, event="INTERVAL_END", epoch_num=samples))
    stop = t + 1
    status = "success" if run.converged else "aborted"
    lines.append(_line("run_stop", stop, event="INTERVAL_END", status=status, epoch=run.epochs * unit))
    text = "\n".join(lines) + "\n"
    if run.break_rule == "nan_time":
        text = text.replace(f'"time_ms": {run_start}, "event_type": "INTERVAL_START", "key": "run_start"',
                            '"time_ms": NaN, "event_type": "INTERVAL_START", "key": "run_start"')
    if run.break_rule == "huge_time":
        text = text.replace(f'"time_ms": {stop}, ', '"time_ms": 1e300, ')
    if run.break_rule == "inf_time":
        text = text.replace(f'"time_ms": {stop}, ', '"time_ms": Infinity, ')
    if run.break_rule == "nan_seed":
        text = text.replace(f'"key": "seed", "value": {run.seed},', '"key": "seed", "value": NaN,')
    return text


def unet3d_time_ms(run: Run, block_epochs: int = 100) -> int:
    """run_stop - run_start of `unet3d_log` (the time the summarizer takes)."""
    return -(-run.epochs // block_epochs) * block_epochs * run.epoch_ms + 1


def resnet_log(run: Run, *, gbs: int = 3264) -> str:
    """A resnet log counting epochs (one block per epoch, an eval every 4)."""
    t = T0 + run.seed
    lines = [_line(k, t, v) for k, v in _header("resnet", run.seed)]
    hyper = [("opt_name", "sgd"), ("sgd_opt_base_learning_rate", 10.0), ("sgd_opt_end_learning_rate", 0.0001),
             ("sgd_opt_learning_rate_decay_poly_power", 2), ("sgd_opt_learning_rate_decay_steps", 1000),
             ("sgd_opt_weight_decay", 0.0002), ("sgd_opt_momentum", 0.9), ("model_bn_span", 408),
             ("opt_learning_rate_warmup_epochs", 2), ("gradient_accumulation_steps", 1), ("global_batch_size", gbs)]
    lines += [_line(k, t + 10, v) for k, v in hyper]
    t += 30_000
    lines += [_line("init_stop", t), _line("run_start", t), _line("train_samples", t, 1281167),
              _line("eval_samples", t, 50000)]
    if run.break_rule == "duplicate_run_start":
        lines.append(_line("run_start", t + run.epoch_ms * (run.epochs - 1)))
    for epoch in range(1, run.epochs + 1):
        lines.append(_line("block_start", t, first_epoch_num=epoch, epoch_count=1))
        lines.append(_line("epoch_start", t, epoch_num=epoch))
        t += run.epoch_ms
        lines.append(_line("epoch_stop", t, epoch_num=epoch))
        lines.append(_line("block_stop", t, first_epoch_num=epoch))
        if epoch % 4 == 0 or epoch == run.epochs:
            accuracy = 0.7601 if epoch == run.epochs and run.converged else 0.70
            lines += [_line("eval_start", t, epoch_num=epoch), _line("eval_accuracy", t + 1, accuracy, epoch_num=epoch),
                      _line("eval_stop", t + 1, epoch_num=epoch)]
    lines.append(_line("run_stop", t + 1, status="success" if run.converged else "aborted"))
    return "\n".join(lines) + "\n"


def resnet_time_ms(run: Run) -> int:
    return run.epochs * run.epoch_ms + 1


def system_description(system: str, accelerator: str = "NVIDIA H100-SXM5-80GB", per_node: int = 8,
                       nodes: int = 1) -> dict[str, str]:
    return {
        "submitter": "TestOrg", "division": "closed", "status": "Available on-premise", "system_name": system,
        "number_of_nodes": str(nodes), "host_processors_per_node": "2", "host_processor_model_name": "Test CPU",
        "host_processor_core_count": "56", "host_processor_vcpu_count": "112", "host_processor_frequency": "",
        "host_processor_caches": "", "host_processor_interconnect": "", "host_memory_capacity": "2 TB",
        "host_storage_type": "NVMe", "host_storage_capacity": "8 TB", "host_networking": "",
        "host_networking_topology": "", "host_memory_configuration": "", "accelerators_per_node": str(per_node),
        "accelerator_model_name": accelerator, "accelerator_host_interconnect": "", "accelerator_frequency": "",
        "accelerator_on-chip_memories": "", "accelerator_memory_configuration": "HBM3",
        "accelerator_memory_capacity": "80 GB", "accelerator_interconnect": "", "accelerator_interconnect_topology": "",
        "cooling": "", "hw_notes": "", "framework": "Test 1.0", "other_software_stack": "", "operating_system": "Linux",
        "sw_notes": "",
    }


def unet3d_runs(n: int = 40, *, base_epochs: int = 1800, epoch_ms: int = 2_000, slow_every: int = 7) -> list[Run]:
    """``n`` converging runs, epochs-to-target 1800..2700 (multiples of 100), per-epoch time varying a little."""
    return [Run(epochs=base_epochs + 100 * ((i * 5) % 10), epoch_ms=epoch_ms + (i % slow_every) * 3, seed=1000 + i)
            for i in range(n)]


def write_benchmark(root: Path, system: str, benchmark: str, logs: dict[str, str], *,
                    scaling: float | None = None, description: dict[str, str] | None = None) -> Path:
    """Write ``results/<system>/<benchmark>/<name>`` for each log (and scaling.json, systems/<system>.json)."""
    folder = root / "results" / system / benchmark
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in logs.items():
        (folder / name).write_text(text)
    if scaling is not None:
        (folder / "scaling.json").write_text(json.dumps({"scaling_factor": scaling}))
    (root / "systems").mkdir(exist_ok=True)
    (root / "systems" / f"{system}.json").write_text(json.dumps(description or system_description(system), indent=1))
    return folder


def unet3d_folder(root: Path, system: str = "testsys_8xh100", *, runs: list[Run] | None = None,
                  scaling: float | None = 1.0109450109450109, names: str = "result_{n}.txt", **description) -> Path:
    chosen = runs if runs is not None else unet3d_runs()
    logs = {names.format(n=i): unet3d_log(run) for i, run in enumerate(chosen)}
    return write_benchmark(root, system, "unet3d", logs, scaling=scaling,
                           description=system_description(system, **description))


def resnet_folder(root: Path, system: str = "testsys_8xa100", *, runs: list[Run] | None = None,
                  **description) -> Path:
    chosen = runs or [Run(epochs=36 + (i % 3), epoch_ms=60_000 + 500 * i, seed=2000 + i) for i in range(5)]
    logs = {f"result_{i}.txt": resnet_log(run) for i, run in enumerate(chosen)}
    return write_benchmark(root, system, "resnet", logs,
                           description=system_description(system, accelerator="NVIDIA A100-SXM4-80GB", **description))
