"""One verdict per setup against the baseline, as a buyer reads it: the hardware number first (per-epoch
speed, its 95% interval and its direction), then time-to-train with its own interval, each decided
only where its interval leaves 1 out ("h200 is 1.06x faster per epoch [1.05, 1.07]; time-to-train
1.05x [0.94, 1.16], not decided"). One estimator per clause: the interval and the decision belong to
the same quantity.

Before the numbers, what keeps them from being the setups': a profile that differs (shown only under
--force), a smoke run (numbers without decisions), a disturbed host (one sentence per side, the
detail in `mltrain show`)."""

from __future__ import annotations

from orchestrator import text
from orchestrator.insight.compare import Comparison, SetupRow
from orchestrator.insight.host_evidence import HostEvidence
from orchestrator.insight.setup_facts import fact_kind
from orchestrator.insight.statistics import Interval
from orchestrator.render.tables import caveat


def verdict(row: SetupRow, result: Comparison) -> str:
    """The sentence of one setup against the baseline of ``result``."""
    base = next(r for r in result.rows if r.name == result.baseline)
    if row.speedup is None:
        return f"{row.name}: baseline"
    per_epoch = row.seconds_per_epoch.ratio
    if row.speedup.value is None and (per_epoch is None or per_epoch.value is None):
        return f"{row.name}: no olympic score to compare with {base.name}"
    decide = row.attributable and not row.smoke and row.profile == base.profile
    lead: list[str] = []
    if row.profile != base.profile:
        lead.append(f"not comparable: {row.name} was made with the {row.profile} profile, {base.name} with the"
                    f" {base.profile} profile (shown because of --force); the numbers decide nothing")
    elif not row.attributable:
        lead.append("not attributable to the setups: " + " ".join(
            host_sentence(side) for side in (row, base) if side.host is not None and side.host.disturbed))
    clauses = [c for c in (per_epoch_clause(row, base.name, decide), ttt_clause(row, base.name, decide, first=False),
                           epochs_clause(row, decide)) if c]
    said = "; ".join(clauses)
    if decide and row.unmeasured and not (row.published and base.published):
        said += f"; the host was not measured for {' and '.join(row.unmeasured)}: a quiet host is not shown"
    return caveat(" ".join([*(f"{row.name} vs {base.name}: {s.rstrip('.')}." for s in lead), said]), row.smoke)


def per_epoch_clause(row: SetupRow, baseline: str, decide: bool) -> str:
    """'h200 is 1.06x faster per epoch than h100 [1.05, 1.07] (hardware)': seconds per epoch, the ratio
    of its means with that ratio's interval, said in the direction it points (time-to-train first where
    epochs were not logged)."""
    ratio = row.seconds_per_epoch.ratio
    if ratio is None or ratio.value is None:
        return ttt_clause(row, baseline, decide, first=True)
    kind = fact_kind(row.differs) or "nothing known differs"
    return f"{row.name} is {directed(ratio, f' per epoch than {baseline}')} ({kind}){decision(ratio, decide)}"


def ttt_clause(row: SetupRow, baseline: str, decide: bool, *, first: bool) -> str:
    """'time-to-train 1.05x [0.94, 1.16], not decided': the olympic speedup and its bootstrap interval
    (the lead where epochs were not logged: 'a is 1.25x faster to train than b [1.1, 1.4]')."""
    speedup = row.speedup
    if speedup is None or speedup.value is None:
        return "" if first else "no olympic time-to-train to compare (too few converged runs for its rule)"
    if first:
        return f"{row.name} is {directed(speedup, f' to train than {baseline}')}{decision(speedup, decide)}"
    if row.seconds_per_epoch.ratio is None or row.seconds_per_epoch.ratio.value is None:
        return ""  # said first
    return f"time-to-train {_x(speedup.value)}{_bounds(speedup)}{decision(speedup, decide)}"


def epochs_clause(row: SetupRow, decide: bool) -> str:
    """Convergence, said only where its interval decides it (else it is the luck it usually is)."""
    ratio = row.epochs_to_target.ratio
    if ratio is None or ratio.value is None or not decide or not decided(ratio):
        return ""
    return f"epochs-to-target {_x(ratio.value)}{_bounds(ratio)} (convergence)"


def directed(value: Interval, what: str = "") -> str:
    """'1.06x faster [1.05, 1.07]' for a ratio above 1 (better), '1.12x slower [1.05, 1.2]' below it
    (its inverse, the interval inverted with it)."""
    assert value.value is not None
    if value.value >= 1:
        return f"{_x(value.value)} faster{what}{_bounds(value)}"
    inverse = Interval(value=1 / value.value, low=1 / value.high if value.high else None,
                       high=1 / value.low if value.low else None)
    return f"{_x(inverse.value)} slower{what}{_bounds(inverse)}"


def decided(value: Interval) -> bool:
    """The 95% interval leaves 1 (no difference) out."""
    return value.low is not None and value.high is not None and (value.low > 1 or value.high < 1)


def decision(value: Interval, decide: bool) -> str:
    """'' (decided), ', not decided', or '' where nothing may be decided (smoke, disturbed, forced)."""
    if not decide:
        return ""
    if value.low is None or value.high is None:
        return ", not decided (too few seeds for an interval)"
    return "" if decided(value) else ", not decided"


def host_sentence(row: SetupRow) -> str:
    """One sentence for one side's disturbed host: how many seeds, the first cause, where the rest is."""
    return f"{row.name} ran on a disturbed host in {_disturbance(row)}."


def host_line(row: SetupRow) -> str:
    """'host of a: quiet (9 of 9 seeds)', 'host of b: disturbed in 3 of 3 seeds (the first cause; details:
    mltrain show RUN)': the evidence, said before the numbers, one sentence per setup."""
    if row.host is None:
        return f"host of {row.name}: not measured"
    if row.host.disturbed:
        return f"host of {row.name}: disturbed in {_disturbance(row)}"
    return f"host of {row.name}: {row.host.sentence()}"


def _disturbance(row: SetupRow) -> str:
    """'3 of 5 seeds (the first cause; details: mltrain show RUN)'."""
    evidence: HostEvidence | None = row.host
    assert evidence is not None
    total = evidence.quiet + evidence.disturbed + evidence.unknown
    first = evidence.causes[0].split(": ", 1)[-1] if evidence.causes else "see its seeds"
    more = f"; details: mltrain show {row.run_ids[0]}" if row.run_ids else ""
    return f"{evidence.disturbed} of {total} seeds ({first}{more})"


def _x(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}x"


def _bounds(value: Interval) -> str:
    """' [1.05, 1.07]': three digits, four where three would show both ends alike."""
    digits = 3
    if value.low is not None and value.high is not None and f"{value.low:.3g}" == f"{value.high:.3g}":
        digits = 4
    return text.bounds(value.low, value.high, lambda v: "?" if v is None else f"{v:.{digits}g}")
