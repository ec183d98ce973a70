"""Stop signals as one exception: SIGINT, SIGTERM and SIGHUP raise `Stop` in the main thread.

`Stop` is a KeyboardInterrupt, so every ``except KeyboardInterrupt`` and ``finally`` on the way out
(the seed being stopped in order, the run recorded as interrupted) treats a scheduler's SIGTERM
and a closed terminal's SIGHUP exactly as it treats Ctrl-C. The first signal raises; later ones
are ignored while that stop is under way (SIGKILL remains the way to cut it short). A signal
that was ignored when mltrain started (``nohup``, a background job's SIGINT) stays ignored.

A `Stop` raised inside a library that catches everything can come out as that library's own error:
pydantic, building a model's validator at its first use, wraps it in a SchemaError. Code that
handles a stop asks `stop_under_way` whether an error is one that a stop turned into something else.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stop(KeyboardInterrupt):
    """A stop signal arrived; ``exit_code`` is 128 + its number (130, 143, 129)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def signal_of(exc: BaseException) -> int:
    """The signal behind a KeyboardInterrupt (SIGINT for a plain one)."""
    return exc.signum if isinstance(exc, Stop) else signal.SIGINT


class Stops:
    """The handler `stop_on_signals` installs, and what it saw: the signal of the stop under way, if
    any. The first signal raises `Stop`; later ones are ignored while that stop is under way."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is not None:
            return
        self.signum = signum
        raise Stop(signum)


def stop_under_way() -> Stop | None:
    """The stop under way in this process, if a stop signal has arrived within `stop_on_signals`:
    an error that arose since is that stop's doing, whatever a library made of it. None otherwise,
    and outside `stop_on_signals` (or within `held`, where a signal waits)."""
    for sig in STOP_SIGNALS:
        handler = signal.getsignal(sig)
        if isinstance(handler, Stops) and handler.signum is not None:
            return Stop(handler.signum)
    return None


@contextlib.contextmanager
def _handling(handler: Callable[[int, FrameType | None], None]) -> Iterator[bool]:
    """``handler`` for every stop signal within the block (those ignored when mltrain started stay
    ignored), the previous handlers after it. Yields False, changing nothing, off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = {}
    for sig in STOP_SIGNALS:
        current = signal.getsignal(sig)
        if current is signal.SIG_IGN:
            continue
        previous[sig] = current
        signal.signal(sig, handler)
    try:
        yield True
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Stops]:
    """Within the block, the stop signals raise `Stop` (main thread only; elsewhere a no-op). The
    yielded `Stops` keeps the signal: a caller can still tell it after a library turned the
    exception into something else (typer returns a KeyboardInterrupt as exit code 130)."""
    stops = Stops()
    with _handling(stops):
        yield stops


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Within the block, a stop signal is held and delivered again as soon as the block ends, to
    whatever handler was in place. For calls into code that catches everything (mlperf_logging's
    checkers wrap each rule in a bare ``except:``, which would take a `Stop` for a failed rule and
    go on): the stop then lands in our code. Main thread only; elsewhere a no-op."""
    arrived: list[int] = []
    try:
        with _handling(lambda signum, _frame: arrived.append(signum)):
            yield
    finally:  # the block's own exception too: a held stop is never lost
        if arrived:
            signal.raise_signal(arrived[0])
