"""Each setup's convergence beside MLCommons' reference (`orchestrator.insight.convergence`): a
table for the terminal and one sentence per setup that says what the comparison means."""

from __future__ import annotations

from orchestrator import text
from orchestrator.insight.compare import Comparison, SetupRow
from orchestrator.insight.convergence import SLOWER_ALPHA, ConvergenceCheck
from orchestrator.render.fit import Col, Fitted, fit

VERDICT_WORDS = {
    "slower": "slower than the reference",
    "faster_than_allowed": "faster than the RCP checker allows",
    "as_reference": "as the reference",
    "too_few_runs": "too few runs to tell",
}


def checked(result: Comparison) -> list[tuple[SetupRow, ConvergenceCheck]]:
    return [(row, row.convergence) for row in result.rows if row.convergence is not None]


def convergence_table(result: Comparison, width: int | None = None) -> Fitted | None:
    """Epochs-to-target (olympic mean, sd, runs) beside the RCP (mean, sd, lowest accepted mean) of
    each setup's batch size, fitted to ``width`` (whole headers, no wrapped cell; None: every column);
    None when no setup has a reference."""
    rows = checked(result)
    if not rows:
        return None
    columns = [Col("setup", cut=True), Col("batch", 2), Col("epochs (mean, sd, n)"), Col("RCP mean, sd", 1),
               Col("RCP fastest", 3), Col("convergence", cut=True), Col("TTT at RCP epochs", 4)]
    cells = [[row.name, str(check.reference.batch_size),
              f"{text.number(check.olympic_epochs)}, {text.number(check.stdev_epochs)}, {check.runs}",
              f"{text.number(check.reference.mean_epochs)}, {text.number(check.reference.stdev_epochs)}",
              text.number(check.reference.min_mean_epochs), VERDICT_WORDS[check.verdict],
              text.duration(check.ttt_at_reference_ms)] for row, check in rows]
    return fit(columns, cells, width, title="convergence vs MLCommons' reference (RCP, epochs-to-target)")


def sentence(row: SetupRow, check: ConvergenceCheck) -> str:
    """What the setup's convergence says, with the numbers and the rule behind it."""
    ref = check.reference
    against = (f"the training {ref.ruleset} RCP for batch size {ref.batch_size} ({ref.how}: mean"
               f" {text.number(ref.mean_epochs)} epochs, sd {ref.stdev_epochs:.3g})")
    if check.verdict == "too_few_runs":
        return f"{row.name}: too few converged runs ({check.runs} in the olympic mean) to compare with {against}"
    mean = f"olympic mean {text.number(check.olympic_epochs)} epochs-to-target over {check.runs} runs"
    p = f"p={check.p_slower:.2g}" if check.p_slower is not None else "p unknown"
    at_reference = (f"; time-to-train at the reference's convergence {text.duration(check.ttt_at_reference_ms)}"
                    " (olympic TTT x RCP mean / olympic epochs)" if check.ttt_at_reference_ms is not None else "")
    if check.verdict == "slower":
        return (f"{row.name} converges slower than the reference: {mean} against {against}; one-sided t-test"
                f" {p} < {SLOWER_ALPHA} (the RCP checker's test, turned round). A numerics or hyperparameter"
                f" regression (precision, learning rate, batch size) is the likely cause{at_reference}")
    if check.verdict == "faster_than_allowed":
        return (f"{row.name} converges faster than the RCP checker allows: {mean}, below its lowest accepted mean"
                f" {text.number(ref.min_mean_epochs)} for {against}; MLCommons would reject the result{at_reference}")
    return f"{row.name} converges as the reference does: {mean} against {against}, slower {p}{at_reference}"


def sentences(result: Comparison) -> list[str]:
    return [sentence(row, check) for row, check in checked(result)]
