"""Log like an MLPerf llama2_70b_lora training run of training 4.1.0, without training.

Its quality metric is an evaluation loss (``eval_accuracy`` carries it, as in the reference): lower
is better, and a run converges when it falls to the target or below. Progress is counted in
samples: an evaluation every EVAL_EVERY samples (``samples_count``), an epoch of TRAIN_SAMPLES.
Time in the log is virtual: each evaluation interval advances the logged clock by FAKE_EVAL_MS.

Variables (all optional):
  TARGET_LOSS       the target (default 0.925)
  FAKE_BASE_EVALS   evaluations seed 0 needs to reach it; seed s needs BASE + (5 s) % 3 (default 8)
  FAKE_EVAL_MS      logged milliseconds per evaluation interval (default 1000)
  FAKE_SLEEP_S      real seconds slept per interval (default 0.002)
  FAKE_MAX_EVALS    evaluations before it gives up with status aborted (default 20)
  FAKE_MODE         converge | no_converge (the loss stops 10 % above the target) | diverge (NaN loss
                    at the third evaluation) | crash
  FAKE_MODE_SEEDS   comma-separated seeds FAKE_MODE applies to (default: all)
"""

import json
import os
import sys
import time

TRAIN_SAMPLES = 3901
"""Samples in one epoch of this workload's (pretend) training set."""
EVAL_EVERY = 384
START_LOSS = 1.5


def event(now_ms: int, key: str, value=None, **metadata) -> None:
    record = {"namespace": "", "time_ms": now_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value,
              "metadata": {"file": "loss_train.py", "lineno": 1, **metadata}}
    sys.stdout.write(":::MLLOG " + json.dumps(record) + "\n")
    sys.stdout.flush()


def loss_at(evaluation: int, needed: int, target: float, mode: str) -> float:
    if mode == "diverge" and evaluation >= 3:
        return float("nan")
    floor = target * 1.1 if mode == "no_converge" else target
    return round(max(floor, target + (START_LOSS - target) * (1 - evaluation / needed)), 6)


def main() -> int:
    seed = int(sys.argv[1])
    env = os.environ
    target = float(env.get("TARGET_LOSS", "0.925"))
    needed = int(env.get("FAKE_BASE_EVALS", "8")) + (seed * 5) % 3
    eval_ms = int(env.get("FAKE_EVAL_MS", "1000"))
    sleep_s = float(env.get("FAKE_SLEEP_S", "0.002"))
    max_evals = int(env.get("FAKE_MAX_EVALS", "20"))
    mode_seeds = env.get("FAKE_MODE_SEEDS", "")
    mode = env.get("FAKE_MODE", "converge") if not mode_seeds or str(seed) in mode_seeds.split(",") else "converge"
    now = int(time.time() * 1000)

    event(now, "cache_clear", True)
    event(now, "init_start")
    event(now, "seed", seed)
    for key, value in (
        ("submission_benchmark", "llama2_70b_lora"), ("submission_org", "mltrain"),
        ("submission_division", "closed"), ("submission_status", "onprem"), ("submission_platform", "lossbench"),
        ("global_batch_size", 8), ("gradient_accumulation_steps", 1), ("opt_base_learning_rate", 4e-4),
        ("opt_learning_rate_training_steps", 1024), ("opt_gradient_clip_norm", 0.3), ("opt_adamw_weight_decay", 1e-4),
        ("lora_alpha", 32), ("lora_rank", 16),
    ):
        event(now, key, value)
    now += 500
    event(now, "init_stop")
    event(now, "run_start")
    event(now, "train_samples", TRAIN_SAMPLES)
    event(now, "eval_samples", 173)
    for evaluation in range(1, max_evals + 1):
        first, samples = (evaluation - 1) * EVAL_EVERY, evaluation * EVAL_EVERY
        event(now, "block_start", samples_count=first)
        time.sleep(sleep_s)
        now += eval_ms
        event(now, "block_stop", samples_count=samples)
        if mode == "crash" and evaluation == 3:
            sys.stderr.write("Traceback (most recent call last):\nRuntimeError: lossbench crashed\n")
            return 1
        event(now, "eval_start", samples_count=samples)
        loss = loss_at(evaluation, needed, target, mode)
        event(now, "eval_accuracy", loss, samples_count=samples)
        event(now, "eval_stop", samples_count=samples)
        if loss != loss:
            event(now, "run_stop", status="aborted", samples_count=samples)
            return 0
        if loss <= target:
            event(now, "run_stop", status="success", samples_count=samples)
            return 0
    event(now, "run_stop", status="aborted", samples_count=max_evals * EVAL_EVERY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
