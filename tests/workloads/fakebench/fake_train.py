"""Log like an MLPerf unet3d training run, without training.

Time in the log is virtual: every epoch advances the logged clock by FAKE_EPOCH_MS (so scores
are exact and known in advance) while the process really sleeps FAKE_SLEEP_S per epoch.

Variables (all optional):
  QUALITY_THRESHOLD  target accuracy (default 0.908)
  FAKE_BASE_EPOCHS   epochs-to-target of seed 0; seed s needs BASE + (s * 7) % 11 (default 20)
  FAKE_EPOCH_MS      logged milliseconds per epoch (default 1000)
  FAKE_EPOCH_JITTER  seed s logs FAKE_EPOCH_MS x (1 + FAKE_EPOCH_JITTER x z_s) per epoch, z_s a standard normal
                     drawn from s (default 0: every seed alike)
  FAKE_INIT_MS       logged milliseconds between init_start and run_start (default 500)
  FAKE_SLEEP_S       real seconds slept per epoch (default 0.005)
  FAKE_SPIN          1: spend each epoch's FAKE_SLEEP_S busy on a CPU, not asleep (every rank: the seed's own load)
  FAKE_MAX_EPOCHS    epoch cap; reaching it stops with status aborted (default 100)
  FAKE_MODE          converge | no_converge | diverge | crash | hang | oom | no_run_start | stop_before_start
                     | duplicate_run_start (a second run_start after the first epoch)
  FAKE_MODE_SEEDS    comma-separated seeds FAKE_MODE applies to (default: all)
  FAKE_SAMPLES       1: log epochs as samples (samples_count, samples-based epoch_num), as NVIDIA logs do
  FAKE_DIVISION      closed (default) or open
  FAKE_NESTED_LINE   N: print an MLLOG line whose value is a list nested N deep after run_start (a
                     workload's hostile output line)
  RESULTS_DIR        where a copy of the log goes (default /results when it exists)
  RANK               under torchrun: only rank 0 logs (the others run as long, silent), as real workloads do
"""

import json
import os
import random
import sys
import time
from pathlib import Path

SAMPLES_PER_EPOCH = 168


class Log:
    def __init__(self, start_ms: int, copy_to: Path | None, silent: bool = False) -> None:
        self.now_ms = start_ms
        self.silent = silent
        self.copy = copy_to.open("w") if copy_to and not silent else None

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def event(self, key: str, value=None, **metadata) -> None:
        record = {
            "namespace": "",
            "time_ms": self.now_ms,
            "event_type": "POINT_IN_TIME",
            "key": key,
            "value": value,
            "metadata": {"file": "fake_train.py", "lineno": 1, **metadata},
        }
        if self.silent:
            return
        line = ":::MLLOG " + json.dumps(record)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if self.copy:
            self.copy.write(line + "\n")
            self.copy.flush()


def main() -> int:
    seed = int(sys.argv[1])
    env = os.environ
    target = float(env.get("QUALITY_THRESHOLD", "0.908"))
    epochs_needed = int(env.get("FAKE_BASE_EPOCHS", "20")) + (seed * 7) % 11
    epoch_ms = int(env.get("FAKE_EPOCH_MS", "1000"))
    epoch_ms = round(epoch_ms * (1 + float(env.get("FAKE_EPOCH_JITTER", "0")) * random.Random(seed).gauss(0, 1)))
    init_ms = int(env.get("FAKE_INIT_MS", "500"))
    sleep_s = float(env.get("FAKE_SLEEP_S", "0.005"))
    max_epochs = int(env.get("FAKE_MAX_EPOCHS", "100"))
    mode_seeds = env.get("FAKE_MODE_SEEDS", "")
    applies = not mode_seeds or str(seed) in mode_seeds.split(",")
    mode = env.get("FAKE_MODE", "converge") if applies else "converge"
    in_samples = env.get("FAKE_SAMPLES") == "1"
    results = Path(env.get("RESULTS_DIR", "/results"))
    log = Log(int(time.time() * 1000), results / "mllog.txt" if results.is_dir() else None,
              silent=int(env.get("RANK", "0")) != 0)
    if env.get("WORLD_SIZE"):
        print(f"fakebench: rank {env.get('RANK', '0')} of {env['WORLD_SIZE']}")  # noqa: T201

    print(f"fakebench: seed {seed}, mode {mode}, {epochs_needed} epochs to target")  # noqa: T201
    log.event("cache_clear", True)
    log.event("init_start")
    log.event("seed", seed)
    for key, value in (
        ("submission_benchmark", "unet3d"),
        ("submission_org", "mltrain"),
        ("submission_division", env.get("FAKE_DIVISION", "closed")),
        ("submission_status", "onprem"),
        ("submission_platform", "fakebench"),
        ("opt_name", "sgd"),
        ("opt_base_learning_rate", 2.0),
        ("opt_learning_rate_warmup_epochs", 1000),
        ("opt_learning_rate_decay_boundary_epochs", []),
        ("opt_learning_rate_decay_factor", 1.0),
        ("opt_weight_decay", 0.0),
        ("opt_momentum", 0.9),
        ("oversampling", 0.4),
        ("training_input_shape", [128, 128, 128]),
        ("validation_input_shape", [128, 128, 128]),
        ("validation_overlap", 0.5),
        ("weights_initialization", None),
    ):
        log.event(key, value)
    log.advance(init_ms)
    log.event("init_stop")
    if mode == "stop_before_start":
        log.event("run_stop", status="aborted")
        log.advance(1)
    if mode != "no_run_start":
        log.event("run_start")
    nested = int(env.get("FAKE_NESTED_LINE", "0"))
    if nested:
        print(':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "nested", '  # noqa: T201
              f'"value": {"[" * nested}{"]" * nested}, "metadata": {{}}}}', flush=True)
    for key, value in (
        ("train_samples", 168),
        ("eval_samples", 42),
        ("samples_per_epoch", SAMPLES_PER_EPOCH),
        ("global_batch_size", 2),
        ("gradient_accumulation_steps", 1),
    ):
        log.event(key, value)

    def epoch_tag(epoch: int) -> dict:
        return {"epoch_num": epoch * SAMPLES_PER_EPOCH} if in_samples else {"epoch_num": epoch}

    for epoch in range(1, max_epochs + 1):
        block = (
            {"samples_count": (epoch - 1) * SAMPLES_PER_EPOCH}
            if in_samples
            else {"first_epoch_num": epoch, "epoch_count": 1}
        )
        log.event("block_start", **block)
        log.event("epoch_start", **epoch_tag(epoch))
        if env.get("FAKE_SPIN") == "1":
            until = time.monotonic() + sleep_s
            while time.monotonic() < until:
                pass
        else:
            time.sleep(sleep_s)
        log.advance(epoch_ms)
        log.event("epoch_stop", **epoch_tag(epoch))
        log.event("block_stop", **block)
        if mode == "duplicate_run_start" and epoch == 1:
            log.event("run_start")
        if mode == "crash" and epoch == 3:
            sys.stderr.write("Traceback (most recent call last):\nRuntimeError: fakebench crashed\n")
            return 1
        if mode == "oom" and epoch == 3:
            sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            return 1
        if mode == "hang" and epoch == 3:
            while True:
                time.sleep(1)
        log.event("eval_start", **epoch_tag(epoch))
        if mode == "diverge":
            accuracy = 0.0 if epoch >= 3 else 0.1
        elif mode == "no_converge":
            accuracy = target * 0.9 * min(1.0, epoch / epochs_needed)
        else:
            accuracy = round(target * min(1.0, epoch / epochs_needed), 6)
            if epoch >= epochs_needed:
                accuracy = max(accuracy, target)
        log.event("eval_accuracy", accuracy, **epoch_tag(epoch))
        log.event("eval_stop", **epoch_tag(epoch))
        if mode == "diverge" and accuracy < 1e-6:
            log.event("run_stop", status="aborted")
            return 0
        if accuracy >= target:
            log.event("run_stop", status="success")
            return 0
    log.event("run_stop", status="aborted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
