"""Exam mode without side doors: Check my work in another tab gave each step's right value
for an exam item's Q, K, V, and Practice draws any (kind, seed, level). Both now refuse an open exam's
items, recognised by their given matrices (fingerprints stored with the assignment), not by seed."""

from __future__ import annotations

import exercises
import storage
from services import db
from tests.apptest_helpers import open_page
from ui import check_work as cw

SEED = 12


def _exam(engine, kind: str = "attention", level: int = 1):
    item = exercises.generate(kind, SEED, level)
    created = storage.create_assignment(engine, "Exam", [{"kind": kind, "level": level}], 1, exercises=[item],
                                        rules={"exam": True, "attempts": 1})
    return item, created


def _text(matrix) -> str:
    return "\n".join(" ".join(repr(float(x)) for x in row) for row in matrix)


def _check_qkv(item) -> object:
    at = open_page("app_pages/check_work.py")
    at.session_state[cw.form_key("attention")] = 1  # from Q, K and V
    at.run()
    for name in ("Q", "K", "V"):
        at.text_area(key=cw.input_key(name)).input(_text(item.given[name]))
    if at.toggle(key=cw.CAUSAL).value != bool(item.given.get("causal")):
        at.toggle(key=cw.CAUSAL).set_value(bool(item.given.get("causal")))
    at.button(key="checkwork.check_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_check_my_work_refuses_an_open_exams_item(fresh_sqlite):
    item, created = _exam(db.engine())
    at = _check_qkv(item)
    assert any("an item of an exam that is still running" in e.value for e in at.error)
    assert not at.dataframe, "no step's value is shown"
    storage.update_assignment(fresh_sqlite, created.assignment.code, created.teacher_key,
                              rules={"exam": True, "closed": True})
    after = _check_qkv(item)  # the exam is over: computed again
    assert not any("still running" in e.value for e in after.error) and after.dataframe


def test_practice_refuses_to_draw_an_open_exams_item(fresh_sqlite):
    item, created = _exam(db.engine())
    at = open_page("app_pages/practice.py", {"kind": "attention", "level": "1", "seed": str(SEED)})
    assert not at.exception
    assert any("an item of an exam that is still running" in e.value for e in at.error)
    assert not [w for w in at.text_input if (w.key or "").startswith("ans-")], "no answer grid, nothing graded"
    other = open_page("app_pages/practice.py", {"kind": "attention", "level": "1", "seed": str(SEED + 1)})
    assert not any("still running" in e.value for e in other.error)
    storage.update_assignment(fresh_sqlite, created.assignment.code, created.teacher_key, rules={"exam": False})
    again = open_page("app_pages/practice.py", {"kind": "attention", "level": "1", "seed": str(SEED)})
    assert not any("still running" in e.value for e in again.error)
