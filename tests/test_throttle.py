"""Throttling (issues 18 and 31): after a few wrong secrets from one address, each further try waits
longer (exponential, capped), the page says so, and a refused try never reaches the key check. The
counts live in the database, per client address and with a global budget per form, so a new
websocket per guess (or another replica) changes nothing; every form that accepts a secret has one."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa
from streamlit.testing.v1 import AppTest

from services import assignments as service
from services import gradebook as gb_service
from services import throttle
from services.throttle import Throttle
from storage import db as storage_db
from tests.apptest_helpers import ROOT, open_page


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


def _lift(engine, form: str) -> None:
    """The wait is over (as if its time had passed): every source of the form may try again."""
    with engine.begin() as conn:
        conn.execute(sa.update(storage_db.throttles).where(storage_db.throttles.c.form == form)
                     .values(until=datetime(2000, 1, 1)))


def _failures(engine, form: str) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(storage_db.throttles.c.source, storage_db.throttles.c.failures)
                            .where(storage_db.throttles.c.form == form)).all()
    return {("*" if r.source == "*" else "source"): r.failures for r in rows}


def test_the_gradebook_throttles_wrong_keys_and_says_so(monkeypatch, db):
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
    # a new websocket (a new session) from the same address waits too: counted in the database
    fresh = AppTest.from_file(str(ROOT / "app_pages" / "gradebook.py"), default_timeout=60).run()
    _wrong_key(fresh, code, right)
    assert "Wait" in fresh.error[0].value and len(checks) == throttle.FREE + 1
    _lift(db, "gradebook")
    _wrong_key(at, code, right)
    assert "gradebook.auth" in at.session_state and "source" not in _failures(db, "gradebook")


def test_share_codes_are_throttled_per_address_across_sessions(monkeypatch, db):
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
    assert _failures(db, "assignments")["source"] == throttle.FREE + 1  # a rerun is no new guess
    count = len(loads)
    at.run()
    assert len(loads) == count
    # a new session (a new websocket per guess) is refused just the same
    fresh = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    fresh.query_params["assignment"] = "ZZZZZZZE"
    fresh.run()
    assert any("Wait" in e.value for e in fresh.error) and len(loads) == count


def test_the_dashboard_key_form_is_throttled_across_sessions(monkeypatch, db):
    mines = []
    real = service.mine
    monkeypatch.setattr(service, "mine", lambda k: mines.append(k) or real(k))
    wrong = service.create("Other", [{"kind": "scores", "level": 1, "count": 1}], 4).teacher_key[::-1]
    for _ in range(throttle.FREE + 2):  # a new session per guess
        at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60).run()
        at.text_input(key="assign.dash_key").input(wrong)
        next(b for b in at.button if b.label == "Show my assignments").click().run()
        assert not at.exception
    assert len(mines) == throttle.FREE + 1 and any("Wait" in e.value for e in at.error)


def test_personal_link_tokens_are_throttled_across_sessions(monkeypatch, db):
    from services import submissions

    created = service.create("Listed", [{"kind": "scores", "level": 1, "count": 1}], 4)
    links = service.set_roster(created.assignment, created.teacher_key, "Ada")
    looked = []
    real = submissions.student_for_token
    monkeypatch.setattr(submissions, "student_for_token", lambda a, t: looked.append(t) or real(a, t))
    for i in range(throttle.FREE + 2):  # a new session per forged token
        at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
        at.query_params["assignment"] = created.assignment.code
        at.query_params["t"] = f"forged-token-{i:04d}"
        at.run()
        assert not at.exception
    assert len(looked) == throttle.FREE + 1 and any("Wait" in e.value for e in at.error)
    _lift(db, "personal_link")
    ada = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    ada.query_params["assignment"] = created.assignment.code
    ada.query_params["t"] = links["Ada"]
    ada.run()
    assert not ada.exception and "Working as" in " ".join(m.value for m in ada.markdown)


def test_recovery_codes_are_throttled_across_sessions(monkeypatch, db):
    from services import profiles

    opened = []
    real = profiles.open_with_code
    monkeypatch.setattr(profiles, "open_with_code", lambda c, b=None: opened.append(c) or real(c, b))
    for i in range(throttle.FREE + 2):
        at = open_page("app_pages/progress.py")
        at.text_input(key="progress.data.code").input(f"ABCD-EFGH-JKMN-PQRS-TV{i:02d}")
        next(b for b in at.button if b.key == "progress.data.open").click().run()
        assert not at.exception
    assert len(opened) == throttle.FREE + 1
    assert any("wait a minute" in w.value for w in at.warning)


# ---------------------------------------------------------------- the client address, the global budget


def test_the_client_address_is_the_one_the_trusted_proxy_saw():
    trusted = "127.0.0.1/32,::1/128"
    # nginx on this machine (Streamlit reports a localhost peer as None) appends the address it saw
    assert throttle.client_address(None, {"X-Forwarded-For": "6.6.6.6, 203.0.113.5"}, trusted) == "203.0.113.5"
    assert throttle.client_address(None, {"x-real-ip": "203.0.113.9"}, trusted) == "203.0.113.9"
    # a browser talking to the server directly cannot pick its address with a header
    assert throttle.client_address("198.51.100.7", {"X-Forwarded-For": "6.6.6.6"}, trusted) == "198.51.100.7"
    assert throttle.client_address("198.51.100.7", {"X-Real-IP": "6.6.6.6"}, trusted) == "198.51.100.7"
    assert throttle.client_address(None, {}, trusted) == "local"
    assert throttle.client_address(None, {"X-Forwarded-For": "garbage"}, trusted) == "local"
    # an IPv6 host is counted by its /64; no address is stored, only a digest
    assert throttle.source_of("2001:db8::1") == throttle.source_of("2001:db8::beef")
    assert throttle.source_of("203.0.113.5") != throttle.source_of("203.0.113.6")
    assert "203.0.113.5" not in throttle.source_of("203.0.113.5")


def test_a_global_budget_per_form_stops_many_addresses_at_once(db):
    gate = throttle.Shared("gradebook", budget=10, window=60.0)
    waits = [gate.failed(throttle.source_of(f"203.0.113.{i}")) for i in range(10)]
    assert waits[:9] == [0.0] * 9 and waits[9] > 50  # the 10th wrong try in the window spends the budget
    assert gate.remaining(throttle.source_of("198.51.100.1")) > 50  # a new address waits too
    assert throttle.Shared("dashboard").remaining(throttle.source_of("198.51.100.1")) == 0  # per form
