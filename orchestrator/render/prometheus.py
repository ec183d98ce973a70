"""A qualification as a Prometheus textfile for node_exporter's textfile collector
(``--collector.textfile.directory``), written with prometheus_client's own exposition code.

    mltrain_qualify_verdict{node,suite,verdict}            1 for the node's verdict, 0 for the others
    mltrain_qualify_exit_code{node,suite}                  the exit code that verdict gave
    mltrain_qualify_check_status{node,suite,check,status}  1 for each check's status, 0 for the others
    mltrain_qualify_metric{node,suite,check,metric,unit}   each measured number
    mltrain_qualify_metric_lower_bound / _upper_bound       its reference's bounds (where it has them)
    mltrain_qualify_metric_status{...,status}              1 for the measurement's status (pass, warn, fail,
                                                           inconclusive, or unjudged: no reference, no floor)
    mltrain_qualify_metric_repeats{...}                    re-measurements of a number that failed first
    mltrain_qualify_remediation{node,suite,check,action,gpu,target}  1 for each remedy a FAIL asks for
                                                           (gpu: NVML's index, "" for the node; target: another node)
    mltrain_qualify_duration_seconds{node,suite}           wall time of the qualification
    mltrain_qualify_last_run_timestamp_seconds{node,suite} when it ended (alert on a stale node)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from orchestrator.qualify.wording import exit_code_help
from orchestrator.results.qualification import MEASUREMENT_STATUSES, VERDICTS, QualificationRecord, Status

STATUSES = tuple(s.value for s in Status if s is not Status.UNJUDGED)
"""A check's statuses (a number alone can be unjudged)."""


def textfile(records: Sequence[QualificationRecord]) -> bytes:
    registry = CollectorRegistry()
    node_labels = ["node", "suite"]
    verdict = Gauge("mltrain_qualify_verdict", "Node qualification verdict (1 for the current one)",
                    [*node_labels, "verdict"], registry=registry)
    code = Gauge("mltrain_qualify_exit_code", f"Exit code of the qualification ({exit_code_help()})", node_labels,
                 registry=registry)
    check_status = Gauge("mltrain_qualify_check_status", "Status of each qualification check (1 for the current one)",
                         [*node_labels, "check", "status"], registry=registry)
    metric_labels = [*node_labels, "check", "metric", "unit"]
    value = Gauge("mltrain_qualify_metric", "A number a qualification check measured", metric_labels,
                  registry=registry)
    lower = Gauge("mltrain_qualify_metric_lower_bound", "Lower bound of the metric's reference", metric_labels,
                  registry=registry)
    upper = Gauge("mltrain_qualify_metric_upper_bound", "Upper bound of the metric's reference", metric_labels,
                  registry=registry)
    metric_status = Gauge("mltrain_qualify_metric_status", "Status of each measured number (1 for the current one)",
                          [*metric_labels, "status"], registry=registry)
    repeats = Gauge("mltrain_qualify_metric_repeats", "Re-measurements of a number that failed its first reading",
                    metric_labels, registry=registry)
    remediation = Gauge("mltrain_qualify_remediation", "What a failed check asks for (1 per remedy)",
                        [*node_labels, "check", "action", "gpu", "target"], registry=registry)
    duration = Gauge("mltrain_qualify_duration_seconds", "Wall time of the qualification", node_labels,
                     registry=registry)
    last = Gauge("mltrain_qualify_last_run_timestamp_seconds", "When the qualification ended (Unix time)",
                 node_labels, registry=registry)
    for record in records:
        node = (record.node, record.suite)
        for status in VERDICTS:
            verdict.labels(*node, status.value).set(1 if record.verdict is status else 0)
        code.labels(*node).set(record.exit_code)
        duration.labels(*node).set(record.duration_s)
        last.labels(*node).set(datetime.fromisoformat(record.ended_at).timestamp())
        for remedy in record.remediation:
            remediation.labels(*node, remedy.check, remedy.action.value, "" if remedy.gpu is None else str(remedy.gpu),
                               remedy.node or "").set(1)
        for check in record.checks:
            for status in STATUSES:
                check_status.labels(*node, check.name, status).set(1 if check.status.value == status else 0)
            for m in check.measurements:
                labels = (*node, check.name, m.metric, m.unit)
                value.labels(*labels).set(m.value)
                if m.reference is not None and m.reference.lower is not None:
                    lower.labels(*labels).set(m.reference.lower)
                if m.reference is not None and m.reference.upper is not None:
                    upper.labels(*labels).set(m.reference.upper)
                for status in MEASUREMENT_STATUSES:
                    metric_status.labels(*labels, status.value).set(1 if m.status is status else 0)
                repeats.labels(*labels).set(len(m.quorum.repeats) if m.quorum is not None else 0)
    return generate_latest(registry)
