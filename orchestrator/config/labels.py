"""A label: the name a user gives a setup (``--label`` of run, import and infer), shown in tables,
plots and file names. One rule for every command that takes one."""

from __future__ import annotations

from orchestrator.errors import UsageError

MAX_LABEL = 100


def check_label(label: str | None) -> str | None:
    """A label names a setup in tables, plots and file names: one printable line."""
    if label is None:
        return None
    if not label.strip() or len(label) > MAX_LABEL or not label.isprintable():
        raise UsageError(f"--label {label!r}: give a name of 1 to {MAX_LABEL} printable characters on one line")
    return label


def label_from(name: str) -> str:
    """A label made from a name mltrain found (an imported folder's): its printable characters on one
    line, at most `MAX_LABEL` of them."""
    printable = "".join(c if c.isprintable() else " " for c in name)
    return " ".join(printable.split())[:MAX_LABEL] or "imported"
