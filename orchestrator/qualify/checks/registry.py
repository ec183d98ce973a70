"""A registry of qualification checks, in the order a node's record lists them: every list of checks
(qualify.yaml's settings per check, the probe's order, the device-bound checks, the quorum's repeatable
ones, the tests') is read from one. It names no check: mltrain's are registered above the checks, in
`orchestrator.qualify.catalog`, and the registry is passed to whatever needs it (the configuration's
loader, a node's plan, a fleet's).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from orchestrator.qualify.checks.base import NodeCheck
    from orchestrator.qualify.checks.declaration import CheckSettings, Declaration


@dataclass(frozen=True)
class Registry:
    """The checks by name, in order (immutable: `with_check` makes another)."""

    checks: tuple[Any, ...]
    """Node checks (`base.NodeCheck`) and fleet checks, each with its ``declaration``."""

    def __post_init__(self) -> None:
        names = [c.declaration.name for c in self.checks]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise UsageError(f"check {twice[0]!r} is registered twice")

    def __iter__(self) -> Iterator[Any]:
        return iter(self.checks)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.declaration.name for c in self.checks)

    @property
    def declarations(self) -> tuple[Declaration, ...]:
        return tuple(c.declaration for c in self.checks)

    def get(self, name: str) -> Any:
        for check in self.checks:
            if check.declaration.name == name:
                return check
        raise KeyError(name)

    def declaration(self, name: str) -> Declaration | None:
        return next((c.declaration for c in self.checks if c.declaration.name == name), None)

    @property
    def fleet(self) -> tuple[str, ...]:
        """The checks a fleet runs between its nodes."""
        return tuple(d.name for d in self.declarations if d.runs == "fleet")

    @property
    def probe(self) -> tuple[str, ...]:
        """The probe's checks, in their default order."""
        return tuple(d.name for d in self.declarations if d.runs == "probe")

    @property
    def repeatable(self) -> tuple[str, ...]:
        """The checks whose declaration lets the quorum repeat them."""
        return tuple(d.name for d in self.declarations if d.repeat)

    @property
    def passive(self) -> tuple[str, ...]:
        """The checks that read the node's state and load nothing."""
        return tuple(d.name for d in self.declarations if d.passive)

    def settings_type(self, name: str, where: str) -> type[CheckSettings] | None:
        """The settings type of check ``name`` where a suite gives it settings (``device``/``suite``)."""
        declaration = self.declaration(name)
        if declaration is None or declaration.settings_at != where:
            return None
        return declaration.settings

    def device_settings(self) -> tuple[str, ...]:
        """The checks a suite gives settings per kind of device (``cpu:``/``cuda:``)."""
        return tuple(d.name for d in self.declarations if d.settings_at == "device")

    def with_check(self, check: Any, *, after: str | None = None) -> Registry:
        """This registry and ``check``, after the check named ``after`` (default: the last probe check
        for a probe check, else the end)."""
        names = self.names
        if after is None and check.declaration.runs == "probe" and self.probe:
            after = self.probe[-1]
        at = names.index(after) + 1 if after is not None else len(names)
        return Registry((*self.checks[:at], check, *self.checks[at:]))

    def node_checks(self, names: Iterable[str]) -> list[NodeCheck]:
        """The node checks among ``names``, in this registry's order."""
        wanted = set(names)
        return [c for c in self.checks if c.declaration.name in wanted and c.declaration.runs != "fleet"]

    def ordered(self, names: Sequence[str], probe_order: Sequence[str]) -> list[str]:
        """``names`` in the registry's order, the probe's checks among them in ``probe_order`` (the
        order qualify.yaml gives the probe), where the first of them stands."""
        wanted = set(names)
        probed = [n for n in probe_order if n in wanted]
        found: list[str] = []
        for declaration in self.declarations:
            if declaration.name not in wanted:
                continue
            if declaration.runs == "probe":
                if probed and probed[0] not in found:
                    found += probed
            else:
                found.append(declaration.name)
        return found
