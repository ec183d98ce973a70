"""MLPerf Inference's audit tests (mlcommons/inference ``compliance/``), as LoadGen runs them: an
``audit.config`` LoadGen reads beside the test's settings.

- TEST01 (accuracy in performance mode): a performance test that also logs a sample of its responses
  (``accuracy_log_sampling_target`` per model, the reference's ``TEST01/<model>/audit.config``), which
  the verification compares with the accuracy run's.
- TEST04 (no caching of results): a performance test that issues the same sample over and over
  (``performance_issue_same``), whose score must not beat the submission's by more than 10%.

The verification is the orchestrator's (``orchestrator/inference/compliance.py``); the harness only
runs the test and writes what it logged.
"""

from __future__ import annotations

from typing import Any

from workloads.inference.errors import HarnessError

TESTS = ("TEST01", "TEST04")
ACCURACY_LOG_RNG_SEED = 720381539243781796
"""TEST01's seed of which responses are logged (every model's audit.config)."""


def audit_settings(test: str, module: Any) -> dict[str, int]:
    """The ``*.*`` keys of the reference's audit.config of ``test`` for the model ``module``."""
    if test == "TEST01":
        target = getattr(module, "TEST01_SAMPLING_TARGET", None)
        if target is None:
            raise HarnessError(f"--audit TEST01: {module.NAME} declares no TEST01_SAMPLING_TARGET (its audit.config)")
        return {"mode": 2, "accuracy_log_rng_seed": ACCURACY_LOG_RNG_SEED, "accuracy_log_sampling_target": target}
    if test == "TEST04":
        return {"mode": 2, "performance_issue_unique": 0, "performance_issue_same": 1,
                "performance_issue_same_index": 3}
    raise HarnessError(f"--audit {test}: one of {', '.join(TESTS)}")


def audit_config_text(test: str, module: Any, scenario: str) -> str:
    """The audit.config LoadGen reads (TEST04's keys per scenario, as the reference writes them)."""
    scope = "*.*" if test == "TEST01" else f"*.{scenario}"
    lines = [f"# {test} of MLPerf Inference's compliance tests, written by workloads.inference"]
    lines += [f"{scope}.{key} = {value}" for key, value in audit_settings(test, module).items()]
    return "\n".join(lines) + "\n"
