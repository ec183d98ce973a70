"""`collector.paused`: the cyclic collector off while records are built, and as it was after."""

from __future__ import annotations

import gc

import pytest

from orchestrator import collector


def test_the_collector_is_off_inside_and_as_it_was_after_even_on_an_error():
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector.paused():
        assert not gc.isenabled()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # a nested pause leaves it off
        raise RuntimeError("while building")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()  # off before: off after
    finally:
        gc.enable()
