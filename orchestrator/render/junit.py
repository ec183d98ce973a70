"""A qualification as JUnit XML, the format CI servers and test dashboards read: one testsuite per
node, one testcase per check. FAIL is a <failure>, INCONCLUSIVE (could not measure) an <error>,
not applicable a <skipped> (never a pass); a WARN passes with its reasons in <system-out> and a
`warn` property. Each testsuite's properties carry the node's verdict and its exit code, as the
record's JSON and the Prometheus textfile do, and what its FAILs ask for: one ``remediation``
property per remedy (``action[:gpu<i>][:node=<name>]``, `Remediation.key`), on the testsuite (the
node's) and on each failed testcase (the check's).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from orchestrator.qualify.wording import quorum_note
from orchestrator.results.qualification import CheckResult, QualificationRecord, Status
from orchestrator.text import number


def junit_xml(records: Sequence[QualificationRecord]) -> str:
    root = ET.Element("testsuites", name="mltrain qualify")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for record in records:
        suite = _suite(record)
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _suite(record: QualificationRecord) -> ET.Element:
    checks = record.checks
    suite = ET.Element("testsuite", {
        "name": f"qualify.{record.node}.{record.suite}",
        "hostname": record.node,
        "timestamp": record.started_at,
        "time": f"{record.duration_s:.3f}",
        "tests": str(len(checks)),
        "failures": str(sum(c.status is Status.FAIL for c in checks)),
        "errors": str(sum(c.status is Status.INCONCLUSIVE for c in checks)),
        "skipped": str(sum(c.status is Status.NOT_APPLICABLE for c in checks)),
    })
    properties = ET.SubElement(suite, "properties")
    for name, value in (("verdict", record.verdict.value), ("exit_code", record.exit_code),
                        ("qualification_id", record.qualification_id),
                        ("hardware", record.hardware.key), ("runner", record.runner),
                        *((f"software.{k}", v) for k, v in sorted(record.software.items())),
                        *(("remediation", r.key) for r in record.remediation)):
        ET.SubElement(properties, "property", name=name, value=str(value))
    for check in checks:
        suite.append(_case(record, check))
    return suite


def _case(record: QualificationRecord, check: CheckResult) -> ET.Element:
    case = ET.Element("testcase", {"classname": f"qualify.{record.node}.{check.kind}", "name": check.name,
                                   "time": f"{check.duration_s:.3f}"})
    message = check.reason or check.status.value
    if check.status is Status.FAIL:
        ET.SubElement(case, "failure", message=message, type="fail").text = "\n".join(check.reasons)
    elif check.status is Status.INCONCLUSIVE:
        ET.SubElement(case, "error", message=message, type=Status.INCONCLUSIVE.value).text = "\n".join(check.reasons)
    elif check.status is Status.NOT_APPLICABLE:
        ET.SubElement(case, "skipped", message=f"not applicable: {message}")
    properties = [("warn", message)] if check.status is Status.WARN else []
    properties += [("remediation", remedy.key) for remedy in check.remediation]
    unjudged = [m.metric for m in check.measurements if m.status is Status.UNJUDGED]
    if unjudged:  # measured, judged by nothing: not a pass
        properties.append(("unjudged", f"{len(unjudged)} number(s) without a reference or floor:"
                                       f" {', '.join(unjudged)}"))
    if properties:  # one element, as JUnit's schema has it
        held = ET.SubElement(case, "properties")
        for name, value in properties:
            ET.SubElement(held, "property", name=name, value=value)
    lines = [f"status: {check.status.value} (sanity {check.sanity.value})", *check.reasons]
    for m in check.measurements:
        ref = m.reference
        bounds = "" if ref is None else (f" bounds [{number(ref.lower)}, {number(ref.upper)}] ({ref.kind}:"
                                         f" {ref.source})")
        repeated = f"; {quorum_note(m.quorum, m.unit)}" if m.quorum is not None else ""
        lines.append(f"{m.metric} = {number(m.value)} {m.unit} [{m.status.value}]{bounds}{repeated}")
    lines += [f"{metric}: not applicable: {why}" for metric, why in sorted(check.skipped.items())]
    ET.SubElement(case, "system-out").text = "\n".join(lines)
    return case
