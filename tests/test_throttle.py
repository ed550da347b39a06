"""Throttling (issue 18): after a few wrong teacher keys or unknown share codes in a session, each
further try waits longer (exponential, capped), the page says so, and a refused try never reaches
the database or the key check."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from services import assignments as service
from services import gradebook as gb_service
from services import throttle
from services.throttle import Throttle
from tests.apptest_helpers import ROOT


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_waits_grow_exponentially_after_the_free_tries_and_are_capped():
    clock = Clock()
    gate = Throttle(free=3, base=2.0, cap=60.0, clock=clock)
    record: dict = {}
    waits = []
    for _ in range(10):
        waits.append(gate.failed(record))
        clock.now += 1000  # each try after its wait
    assert waits == [0, 0, 0, 2, 4, 8, 16, 32, 60, 60]


def test_a_try_inside_the_wait_is_refused_and_the_wait_runs_down():
    clock = Clock()
    gate = Throttle(free=1, base=10.0, cap=100.0, clock=clock)
    record: dict = {}
    gate.failed(record)
    assert gate.remaining(record) == 0
    gate.failed(record)
    assert gate.remaining(record) == 10 and gate.remaining_text(record) == 10
    clock.now += 9.5
    assert gate.remaining(record) == pytest.approx(0.5) and gate.remaining_text(record) == 1
    clock.now += 0.5
    assert gate.remaining(record) == 0


def test_success_clears_and_the_same_attempt_counts_once():
    clock = Clock()
    gate = Throttle(free=0, base=1.0, cap=8.0, clock=clock)
    record: dict = {}
    gate.failed(record, attempt="AAAA")
    gate.failed(record, attempt="AAAA")  # a rerun of the page showing the same unknown code
    assert record["failures"] == 1
    gate.succeeded(record)
    assert record == {} and gate.remaining(record) == 0


def test_records_live_in_the_given_state():
    state: dict = {}
    record = throttle.record_in(state, "gradebook")
    record["failures"] = 2
    assert throttle.record_in(state, "gradebook")["failures"] == 2
    assert throttle.record_in(state, "assignments") == {}


# ---------------------------------------------------------------- on the pages


@pytest.fixture(autouse=True)
def db(fresh_sqlite):
    return fresh_sqlite


def _wrong_key(at: AppTest, code: str, key: str) -> None:
    at.text_input(key="gradebook.code").input(code)
    at.text_input(key="gradebook.key").input(key)
    next(b for b in at.button if b.label == "Open gradebook").click().run()
    assert not at.exception


def test_the_gradebook_throttles_wrong_keys_and_says_so(monkeypatch):
    created = service.create("Locked", [{"kind": "scores", "level": 1, "count": 1}], 3)
    code, right = created.assignment.code, created.teacher_key
    other = service.create("Other", [{"kind": "scores", "level": 1, "count": 1}], 4).teacher_key
    checks = []
    real = gb_service.check
    monkeypatch.setattr(gb_service, "check", lambda c, k: checks.append(k) or real(c, k))
    at = AppTest.from_file(str(ROOT / "app_pages" / "gradebook.py"), default_timeout=60).run()
    for _ in range(throttle.FREE):
        _wrong_key(at, code, other)
        assert "does not open the gradebook" in at.error[0].value
    _wrong_key(at, code, other)  # the first try past the free ones: refused, and a wait set
    _wrong_key(at, code, right)  # even the right key waits now
    assert "Wait 2 s" in at.error[0].value and "longer" in at.error[0].value
    assert len(checks) == throttle.FREE + 1  # the refused try never reached the key check
    assert "gradebook.auth" not in at.session_state
    record = at.session_state["throttle.gradebook"]
    record["until"] = 0  # the wait is over
    at.session_state["throttle.gradebook"] = record
    _wrong_key(at, code, right)
    assert "gradebook.auth" in at.session_state and at.session_state["throttle.gradebook"] == {}


def test_share_codes_are_throttled_per_session(monkeypatch):
    loads = []
    real = service.load
    monkeypatch.setattr(service, "load", lambda c: loads.append(c) or real(c))
    at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60).run()
    for i in range(throttle.FREE + 2):
        at.text_input(key="assign.open_code").input(f"ZZZZZZZ{'ABCDEFGH'[i]}")
        next(b for b in at.button if b.label == "Open").click().run()
        assert not at.exception
    tried = sorted(set(loads))
    assert tried == [f"ZZZZZZZ{c}" for c in "ABCD"]  # the 5th guess waits: never looked up
    assert any("Wait" in e.value and "wrong tries" in e.value for e in at.error)
    assert at.session_state["throttle.assignments"]["failures"] == throttle.FREE + 1  # a rerun is no new guess
    count = len(loads)
    at.run()
    assert len(loads) == count
