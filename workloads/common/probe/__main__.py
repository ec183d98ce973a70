"""``python -m workloads.common.probe SEED``: run the checks of ``MLTRAIN_PROBE_CONFIG`` (JSON, see
`settings`) in their order and print ``:::PROBE`` lines (`protocol`) on stdout.

Exit status: 0 when every check ran (a case that failed its sanity or raised is a line, not an exit
status), 2 when the settings or the seed are wrong (one line on stderr), 3 when torch is missing.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

from workloads.common.probe import registry
from workloads.common.probe.settings import Settings, SettingsError, from_environment


def main(argv: list[str]) -> int:
    try:
        seed = int(argv[0]) if argv else 0
        settings = from_environment()
    except ValueError as exc:  # SettingsError included
        why = exc if isinstance(exc, SettingsError) else f"the seed must be an integer, got {argv[0]!r}"
        sys.stderr.write(f"error: probe settings: {why}\n")
        return 2
    unknown = registry.unknown(settings.order, settings.modules)
    if unknown:
        sys.stderr.write(f"error: probe settings: unknown check {unknown[0]!r}: the probe's checks are"
                         f" {', '.join(registry.CHECKS)}\n")
        return 2
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.stderr.write("error: torch is not installed where the probe runs\n")
        return 3
    try:
        planned = plan(settings)
    except (ImportError, ValueError) as exc:
        sys.stderr.write(f"error: probe settings: {exc}\n")
        return 2
    run(settings, planned, seed)
    return 0


def plan(settings: Settings) -> list[tuple[registry.Check, dict[str, dict[str, Any]]]]:
    """Each check of the order with its settings per device kind, defaults filled in (ValueError
    naming a setting a check does not have)."""
    planned = []
    for name in settings.order:
        check = registry.check(name, settings.modules)
        planned.append((check, {kind: registry.with_defaults(check.DECLARATION, specs[name])
                                for kind, specs in settings.per_kind.items() if specs.get(name) is not None}))
    return planned


def run(settings: Settings, planned: list[tuple[registry.Check, dict[str, dict[str, Any]]]], seed: int) -> None:
    """The device line, then each check's cases and its timing line, in the configured order."""
    import torch

    from workloads.common.probe import device as devices
    from workloads.common.probe import harness, protocol

    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    torch.manual_seed(seed)
    device = devices.open_device(settings.device)
    protocol.device(devices.facts(device, seed))
    context = harness.Context(device=device, seconds=settings.seconds_per_case, max_repeats=settings.max_repeats,
                              seed=seed, data=settings.data)
    for check, specs in planned:
        started = time.perf_counter()
        spec = specs.get(device.kind)
        if spec is not None:
            for case in harness.plan(check, spec, context):
                harness.run_case(case, device)
        protocol.timing(check.DECLARATION["name"], time.perf_counter() - started)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
