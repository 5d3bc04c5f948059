"""The collector held off for a bulk computation comes back as it was: after nested and
overlapping pauses, after an exception, and left off when someone else had turned it off."""

from __future__ import annotations

import gc

import pytest

from twinhub.kernel.collector import collector_paused


def test_pauses_nest_and_the_last_one_enables() -> None:
    assert gc.isenabled()
    outer = collector_paused()
    inner = collector_paused()
    outer.__enter__()
    inner.__enter__()
    assert not gc.isenabled()
    outer.__exit__(None, None, None)  # overlapping, not nested: the other is still open
    assert not gc.isenabled()
    inner.__exit__(None, None, None)
    assert gc.isenabled()


def test_an_exception_enables_it_again() -> None:
    with pytest.raises(ValueError), collector_paused():
        assert not gc.isenabled()
        raise ValueError("on the way")
    assert gc.isenabled()


def test_a_collector_turned_off_by_someone_else_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_decorated_function_runs_paused() -> None:
    @collector_paused()
    def work() -> bool:
        return gc.isenabled()

    assert work() is False
    assert gc.isenabled()
