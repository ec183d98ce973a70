"""The throughput mode of the fake workload: standard library only, no training.

It prints the two MLLOG events the orchestrator reads (`resolved_settings`, then one final
`throughput`) with numbers set by FAKE_* variables, so tests control the rate, the loader and the
failure exactly. Time is virtual (like fake_train.py): the process really sleeps FAKE_SLEEP_S per step.

Variables (all optional):
  STEPS, WARMUP_STEPS  timed and warm-up steps (default 20 and 5)
  DATADIR              a folder (refused, exit 2, when it is not one, as unet3d's is); with files in it
                       the loader rate is reported, else null
  FAKE_RATE            samples per second of the timed steps (default 100)
  FAKE_BATCH           samples per step (default 2)
  FAKE_LOADER_RATE     loader samples per second when DATADIR holds files (default 10 x FAKE_RATE)
  FAKE_SLEEP_S         real seconds slept per step (default 0.001)
  FAKE_THROUGHPUT_MODE ok | crash | oom | xid | bad_input | no_result | hang | daemon (default ok; daemon: as
                       ok, leaving a `sleep 300` running in a session of its own, as a stray worker would;
                       xid: the driver's words for a GPU that fell off the bus, then exit 1)
"""

import json
import os
import subprocess
import sys
import time


def event(key: str, value, metadata: dict | None = None) -> None:
    record = {"namespace": "", "time_ms": int(time.time() * 1000), "event_type": "POINT_IN_TIME", "key": key,
              "value": value, "metadata": {"file": "fake_throughput.py", "lineno": 1, **(metadata or {})}}
    sys.stdout.write(":::MLLOG " + json.dumps(record) + "\n")
    sys.stdout.flush()


def main() -> int:
    env = os.environ
    mode = env.get("FAKE_THROUGHPUT_MODE", "ok")
    try:
        steps = int(env.get("STEPS", "20"))
        warmup = int(env.get("WARMUP_STEPS", "5"))
        rate = float(env.get("FAKE_RATE", "100"))
        batch = int(env.get("FAKE_BATCH", "2"))
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if mode == "bad_input" or steps < 1:
        sys.stderr.write(f"error: STEPS must be at least 1, got {steps}\n")
        return 2
    data = env.get("DATADIR", "")
    if data and not os.path.isdir(data):
        sys.stderr.write(f"error: {data}: no such dataset folder\n")
        return 2
    has_data = bool(data) and any(not n.startswith(".") for n in os.listdir(data))
    loader = float(env.get("FAKE_LOADER_RATE", str(rate * 10))) if has_data else None
    event("resolved_settings", {"precision": "fp32", "requested_precision": "auto", "threads": 1, "nproc": 1,
                                "device": "cpu", "device_name": "fakebench", "capability": None,
                                "channels_last": False, "compile": False, "why": "a test double"})
    for _ in range(warmup + steps):
        time.sleep(float(env.get("FAKE_SLEEP_S", "0.001")))
        if mode == "hang":
            while True:
                time.sleep(1)
    if mode == "crash":
        sys.stderr.write("Traceback (most recent call last):\nRuntimeError: fakebench throughput crashed\n")
        return 1
    if mode == "oom":
        sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
        return 1
    if mode == "xid":
        sys.stderr.write("NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.\n"
                         "RuntimeError: CUDA error: unspecified launch failure\n")
        return 1
    if mode == "no_result":
        return 0
    if mode == "daemon":
        subprocess.Popen(["setsid", "sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    step_ms = batch / rate * 1000 if rate else 0.0  # FAKE_RATE=0: a workload that reports nothing
    event("throughput", rate, {
        "unit": "samples/s", "steps": steps, "warmup_steps": warmup, "batch_size": batch, "global_batch_size": batch,
        "step_ms_median": step_ms, "step_ms_p10": step_ms * 0.95, "step_ms_p90": step_ms * 1.05,
        "loader_samples_per_second": loader, "input_bound": None if loader is None else loader < rate,
        "precision": "fp32", "device_name": "fakebench"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
