"""Assignments and Gradebook pages (AppTest): a teacher creates a set, two students submit in two
sessions, the gradebook opens with the key only and its CSV matches the table."""

from __future__ import annotations

import io
import time
import xml.etree.ElementTree as ET

import pandas as pd
import pytest
import sqlalchemy as sa
import streamlit.testing.v1.app_test as app_test_module
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

import storage
from exercises.cli import selftest
from exercises.core import misconceptions
from exercises.i18n import msg, plural
from services import assignments as service_assignments
from services import exports, submissions, throttle
from tests.apptest_helpers import ROOT, open_page
from tests.served_app import entrypoint_every_run  # noqa: F401  (fixture)
from ui import assignments as ui_assignments
from ui import exports as ui_exports
from ui import mathview
from ui.answer_grid import paste_key

ASSIGNMENTS = str(ROOT / "app_pages" / "assignments.py")
PROFILE = "progress.profile"  # the browser profile a session works under (ui.progress)
GRADEBOOK = str(ROOT / "app_pages" / "gradebook.py")


class RecordingStorage(MemoryMediaFileStorage):
    """The media store of AppTest runs, keeping every file a page hands to the browser."""

    files: dict[str, bytes] = {}

    def load_and_get_id(self, path_or_data, mimetype, kind, filename=None) -> str:
        file_id = super().load_and_get_id(path_or_data, mimetype, kind, filename)
        RecordingStorage.files[file_id] = self._files_by_id[file_id].content
        return file_id


@pytest.fixture(autouse=True)
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "class.sqlite3"))
    monkeypatch.setenv("ATTENTION_SECRET", "page tests")  # the same variants every run
    monkeypatch.setattr(app_test_module, "MemoryMediaFileStorage", RecordingStorage)
    RecordingStorage.files = {}
    engine = storage.open_engine()
    yield engine
    engine.dispose()


def page(path: str, query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(path, default_timeout=60)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    return at.run()


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def texts(at: AppTest) -> str:
    """Everything the page wrote, as one string (to check what a visitor can read)."""
    parts = []
    for kind in ("markdown", "caption", "code", "latex", "success", "info", "warning", "error", "title", "subheader"):
        parts += [str(getattr(e, "value", "")) for e in at.get(kind)]
    return "\n".join(parts)


def create(at: AppTest, title: str, rows: list[tuple[str, int, int]], seed: int = 7, per_student: bool = False,
           allow_solutions: bool = False) -> tuple[str, str]:
    """Fill in the builder and press Create; (code, key) as the page shows them."""
    at.text_input(key="assign.title").input(title)
    at.number_input(key="assign.rows").set_value(len(rows)).run()
    for r, (kind, level, count) in enumerate(rows):
        at.selectbox(key=f"assign.kind.{r}.en").set_value(kind).run()
        at.selectbox(key=f"assign.level.{r}.{kind}").set_value(level)
        at.number_input(key=f"assign.count.{r}").set_value(count)
    at.number_input(key="assign.seed").set_value(seed)
    if per_student:
        at.checkbox(key="assign.per_student").check()
    if allow_solutions:
        at.checkbox(key="assign.allow_solutions").check()
    button(at, "Create assignment").click().run()
    assert not at.exception
    code, link, key = [c.value for c in at.code]
    assert link.endswith(f"?assignment={code}")
    return code, key


def student_opens(code: str, name: str, browser: str | None = None, taken: bool = False) -> AppTest:
    """A student opens the link and types their name, in a new session of their own browser (its
    profile: `browser`, else one per name, as a browser's cookie keeps it); `taken`: the name is another
    browser's, so the page refuses it."""
    at = page(ASSIGNMENTS, {"assignment": code})
    at.session_state[PROFILE] = f"p-test-{browser or name.casefold()}"
    at.text_input(key=f"assign.name_input.{storage.parse_code(code)}").input(name)
    button(at, "Start").click().run()
    assert not at.exception
    if taken:
        assert "That name is already taken" in texts(at) and "Working as" not in texts(at)
    else:
        assert f"Working as **{name}**." in texts(at)
    return at


def type_answers(at: AppTest, a: storage.Assignment, name: str, answers: list[dict[str, str]]) -> None:
    for index, (ex, answer) in enumerate(zip(stored(a, name), answers)):
        for part, text in answer.items():
            at.text_area(key=paste_key(item_prefix(at, a, index, ex), part)).input(text)


def item_prefix(at: AppTest, a: storage.Assignment, index: int, ex) -> str:
    """The key prefix of item `index`'s answer grid on this page: its position and this session's slot id."""
    return f"asg-{index}-{at.session_state[f'assign.slot.{a.code}']}"


def stored(a: storage.Assignment, name: str | None = None):
    """The exercises a student gets, as the server stores them (keyed with its secret)."""
    return submissions.exercises_for(a, name)


def submit(at: AppTest) -> None:
    button(at, "Submit my answers").click().run()
    assert not at.exception


def mistaken_answer(ex, part: str) -> tuple[str, str]:
    """(misconception id, the answer text that mistake gives) for one part of an exercise."""
    for mid, values in misconceptions.alternatives(ex).items():
        if part in values:
            return mid, selftest.as_text(values[part])
    raise AssertionError(f"no catalogued mistake for {ex.id}")


def open_gradebook(code: str, key: str) -> AppTest:
    at = page(GRADEBOOK)
    at.text_input(key="gradebook.code").input(code)
    at.text_input(key="gradebook.key").input(key)
    button(at, "Open gradebook").click().run()
    assert not at.exception
    return at


# ---------------------------------------------------------------- the teacher


def test_teacher_creates_an_assignment_and_sees_the_key_once(db):
    at = page(ASSIGNMENTS)
    code, key = create(at, "Week 3", [("softmax", 2, 2), ("scores", 1, 1)], seed=42, allow_solutions=True)
    a = storage.get_assignment(db, code)
    assert (a.title, a.seed, a.item_count, a.allow_solutions, a.per_student) == ("Week 3", 42, 3, True, False)
    assert storage.verify_teacher_key(db, code, key)
    assert sorted(b.label for b in at.get("download_button")) == ["Answer key (PDF)", "Worksheet (PDF)"]
    assert any(b.label == "Prepare the Moodle XML" for b in at.button)  # built off the script run
    files = service_assignments.pdf_files(a, (), "en")  # what the two buttons hand out
    assert all(files[name].startswith(b"%PDF") for name in ("worksheet.pdf", "answer-key.pdf"))

    button(at, "I have saved the key: hide it").click().run()
    assert key not in texts(at) and at.session_state[ui_assignments.CREATED]["key"] is None
    assert code in texts(at)  # code and link stay


def test_per_student_pdfs_wait_for_the_class_list(db):
    at = page(ASSIGNMENTS)
    code, _ = create(at, "Variants", [("softmax", 1, 1)], per_student=True)
    assert not at.get("download_button") and "Enter the class list" in texts(at)
    at.text_area(key=f"assign.students.{code}").input("Ada\nada").run()
    assert "are the same student" in texts(at) and not at.get("download_button")
    at.text_area(key=f"assign.students.{code}").input("Ada\nAlan").run()
    # per-student sheets are built off the script run (a button, a progress bar, a ZIP), not on click
    assert not at.get("download_button")
    assert any(b.label.startswith("Prepare the sheets of 2 students") for b in at.button)
    button(at, "Prepare the Moodle XML").click().run()  # queued, a progress bar, then the file
    job = exports.get(at.session_state[ui_exports.MOODLE_JOB.format(code=code)])
    deadline = time.monotonic() + 60
    while not job.done and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job.done and job.error is None
    at.run()
    (download,) = at.get("download_button")
    assert download.label == "Moodle XML"
    root = ET.fromstring(job.read())
    assert [q.find("category/text").text.rsplit("/", 1)[-1] for q in root if q.get("type") == "category"] \
        == ["Ada", "Alan"]


def test_bad_builder_input_gets_a_message(db):
    at = page(ASSIGNMENTS)
    button(at, "Create assignment").click().run()  # no title
    assert [e.value for e in at.error] == ["Give the assignment a title."]
    assert not at.code and not at.exception


# ---------------------------------------------------------------- students and the gradebook


def test_two_students_submit_and_the_gradebook_shows_both_with_a_matching_csv(db):
    teacher = page(ASSIGNMENTS)
    code, key = create(teacher, "Quiz", [("softmax", 2, 1), ("scores", 2, 1)], seed=5, per_student=True)
    a = storage.get_assignment(db, code)

    ada = student_opens(code.lower(), "Ada Lovelace")  # the code as a student might type it
    ada_ex = stored(a, "Ada Lovelace")
    type_answers(ada, a, "Ada Lovelace", [selftest.correct_answer(ex) for ex in ada_ex])
    submit(ada)
    assert "Submitted. Your score: 100%." in texts(ada)

    alan = student_opens(code, "Alan Turing")
    alan_ex = stored(a, "Alan Turing")
    assert [ex.to_dict() for ex in alan_ex] != [ex.to_dict() for ex in ada_ex]  # their own variants
    mistake, wrong_a = mistaken_answer(alan_ex[0], "A")
    type_answers(alan, a, "Alan Turing", [{"A": wrong_a}, selftest.correct_answer(alan_ex[1])])
    submit(alan)
    assert "Submitted." in texts(alan) and "Likely mistake" in texts(alan)
    shown = alan.text_area(key=paste_key(item_prefix(alan, a, 0, alan_ex[0]), "A"))
    assert shown.value == wrong_a and shown.disabled  # what was submitted, marked, no longer editable
    assert not any(b.label == "Show solution" for b in alan.button)  # the teacher did not allow them

    book = open_gradebook(code, key)
    frame = book.dataframe[0].value
    # Total next to the name, percent (as the CSV), attempts, time, blank items, same-name flag
    assert list(frame.columns) == ["Student", "Total", "1. Row-wise softmax (L2)", "2. Scores Q Kᵀ (L2)", "Attempts",
                                   "Last submitted", "Left blank", "Same name"]
    assert frame["Student"].tolist() == ["Ada Lovelace", "Alan Turing"]
    assert frame.iloc[0, 1:4].tolist() == [100.0, 100.0, 100.0]
    alan_softmax = float(frame.iloc[1, 2])
    assert alan_softmax < 100.0 and frame.iloc[1, 3] == 100.0
    assert frame.iloc[1, 1] == pytest.approx((alan_softmax + 100.0) / 2, abs=0.1)

    [download] = book.get("download_button")
    csv = RecordingStorage.files[download.proto.url.rsplit("/", 1)[1].split(".")[0]]
    assert csv.startswith("\ufeff".encode())
    exported = pd.read_csv(io.BytesIO(csv), encoding="utf-8-sig", keep_default_na=False,
                           dtype={"Left blank": str, "Same name": str})
    pd.testing.assert_frame_equal(exported, frame, check_dtype=False)

    spec = book.get("vega_lite_chart")[0].proto.spec
    assert "Most common mistakes" in spec
    book_stored = storage.gradebook(db, code, key)
    assert book_stored.misconceptions == {0: [(mistake, 1)]}


def test_solutions_only_after_submitting_and_only_when_allowed(db):
    code, _ = create(page(ASSIGNMENTS), "Open book", [("scaling", 1, 1)], allow_solutions=True)
    a = storage.get_assignment(db, code)
    at = student_opens(code, "Grace")
    ex = stored(a, "Grace")[0]
    before = texts(at)
    assert not any(b.label == "Show solution" for b in at.button)
    assert "Worked solution" not in before and "Answer key" not in before
    reference = selftest.correct_answer(ex)["scaled"]
    assert reference not in before
    rows, cols = ex.part("scaled").shape
    type_answers(at, a, "Grace", [{"scaled": "\n".join(", ".join(["0"] * cols) for _ in range(rows))}])
    submit(at)
    assert "Submitted." in texts(at)
    sol = button(at, "Show solution")
    sol.click().run()
    assert not at.exception and at.get("latex")


def test_unreadable_or_missing_answers_are_not_submitted(db):
    code, key = create(page(ASSIGNMENTS), "Careful", [("scores", 1, 2)])
    a = storage.get_assignment(db, code)
    at = student_opens(code, "Ada")
    submit(at)  # nothing typed
    assert "have no answer yet" in texts(at)
    type_answers(at, a, "Ada", [{"scores": "1 2 3; abc"}, {"scores": "import os"}])
    submit(at)
    assert "could not be read (exercises 1, 2)" in texts(at)
    assert storage.list_submissions(db, code, key) == []
    # one answered, one left empty on purpose
    type_answers(at, a, "Ada", [selftest.correct_answer(stored(a)[0]), {"scores": ""}])
    at.checkbox(key=f"assign.allow_blank.{code}").check()
    submit(at)
    assert "Submitted. Your score: 50%." in texts(at) and "Not answered." in texts(at)
    scores = sorted(s.score for s in storage.list_submissions(db, code, key))
    assert scores == [0.0, 1.0]


def test_a_name_is_needed_and_checked(db):
    code, _ = create(page(ASSIGNMENTS), "Names", [("scores", 1, 1)])
    at = page(ASSIGNMENTS, {"assignment": code})
    button(at, "Start").click().run()
    assert [e.value for e in at.error] == ["Enter your name first."]
    at.text_input(key=f"assign.name_input.{code}").input("x" * 80 + "\u0007").run()
    button(at, "Start").click().run()
    assert at.error and not at.exception


# ---------------------------------------------------------------- bad codes and keys


@pytest.mark.parametrize("text, message", [
    ("not a code!", "is not an assignment code"), ("ZZZZZZZZ", "No assignment has the code ZZZZZZZZ"),
    ("<script>alert(1)</script>", "is not an assignment code")])
def test_a_bad_assignment_link_gets_a_clear_message(db, text, message):
    at = page(ASSIGNMENTS, {"assignment": text})
    assert not at.exception
    assert message in at.error[0].value
    assert at.get("form")  # and a box to type the right code


def test_the_gradebook_needs_the_right_key(db):
    code, key = create(page(ASSIGNMENTS), "Locked", [("scores", 1, 1)])
    _, other_key = create(page(ASSIGNMENTS), "Other", [("scores", 1, 1)])
    storage.record_submission(db, code, "Ada", 0, "scores", 1, 1, {"scores": "1"}, 1.0, None)
    cases = [("nope", key, "not an assignment code"), ("ZZZZZZZZ", key, "No assignment has the code ZZZZZZZZ"),
             (code, "short", "not a teacher key"), (code, other_key, f"does not open the gradebook of {code}"),
             (code, "", "not a teacher key")]
    for n, (code_text, key_text, message) in enumerate(cases):
        at = open_gradebook(code_text, key_text)
        if n == throttle.FREE + 1:  # wrong tries from one address are throttled across sessions
            assert "Wait" in at.error[0].value
            with db.begin() as conn:
                conn.execute(sa.delete(storage.db.throttles))
            at = open_gradebook(code_text, key_text)
        assert message in at.error[0].value
        assert not at.dataframe and "Ada" not in texts(at)
    at = open_gradebook(code, key)
    assert at.dataframe[0].value["Student"].tolist() == ["Ada"]
    button(at, "Close").click().run()
    assert not at.dataframe and at.get("form")


@pytest.mark.usefixtures("entrypoint_every_run")
def test_both_pages_are_in_the_app_navigation(db):
    at = open_page("app_pages/assignments.py")
    assert not at.exception and "Create an assignment" in [h.value for h in at.get("header")]
    at = open_page("app_pages/gradebook.py")
    assert not at.exception and [t.value for t in at.title] == ["Gradebook"]


def test_a_bare_share_link_opens_the_assignment_not_home():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.query_params["assignment"] = "ABCD2345"
    at.run()
    assert not at.exception
    assert any("ABCD2345" in e.value for e in at.error), "the Assignments page answered for the code"


# ---------------------------------------------------------------- after a generator change


def test_a_version_bump_after_creation_changes_neither_the_page_nor_the_grade(db, monkeypatch):
    from exercises.solutions import given_latex
    from tests.changed_generator import bump

    code, key = create(page(ASSIGNMENTS), "Pinned", [("scores", 1, 2)], seed=11)
    a = storage.get_assignment(db, code)
    kept = stored(a)
    bump(monkeypatch, "scores")
    changed = a.spec.exercises(secret=submissions.secret())
    assert [ex.to_dict()["given"] for ex in changed] != [ex.to_dict()["given"] for ex in kept]

    at = student_opens(code, "Ada")
    shown = "\n".join(e.value for e in at.latex)
    for ex, other in zip(kept, changed):
        assert all(mathview.spaced(latex) in shown for _, latex in given_latex(ex)), "the stored given matrices are shown"
        assert any(latex not in shown for _, latex in given_latex(other)), "not what the generator gives now"
    for index, ex in enumerate(kept):
        for part, text in selftest.correct_answer(ex).items():
            at.text_area(key=paste_key(item_prefix(at, a, index, ex), part)).input(text)
    submit(at)
    assert "Submitted. Your score: 100%." in texts(at), "graded against the stored problems"
    subs = storage.list_submissions(db, code, key)
    assert [(s.version, s.exercise) for s in subs] == [(ex.version, ex.to_dict()) for ex in kept]
    book = open_gradebook(code, key)
    assert book.dataframe[0].value.iloc[0, 1:4].tolist() == [100.0, 100.0, 100.0]


def test_a_student_who_first_opens_a_changed_per_student_set_is_told_so(db, monkeypatch):
    from tests.changed_generator import bump

    code, _ = create(page(ASSIGNMENTS), "Variants", [("scores", 1, 1)], per_student=True)
    student_opens(code, "Ada")  # Ada's variant is stored now
    bump(monkeypatch, "scores")
    ada = student_opens(code, "Ada")
    assert not ada.error and any(b.label == "Submit my answers" for b in ada.button)
    at = page(ASSIGNMENTS, {"assignment": code})
    at.text_input(key=f"assign.name_input.{code}").input("Alan")
    button(at, "Start").click().run()
    assert not at.exception
    assert "have changed since your teacher set it" in at.error[0].value
    assert not any(b.label == "Submit my answers" for b in at.button)


# ---------------------------------------------------------------- every kind, through the page


def _grid_text(rows) -> str:
    return "\n".join(", ".join(row) for row in rows)


def _fill(at: AppTest, prefix: str, ex, mode: str) -> None:
    """Type (or choose) one item's answer: "right", "wrong" (first part changed), "blank", "malformed"."""
    from ui.answer_grid import _slug

    for n, part in enumerate(ex.parts):
        if part.is_choice:
            ref = int(part.reference[0, 0])
            value = {"right": ref, "wrong": (ref + 1) % len(part.options)}.get(mode)
            at.radio(key=_slug(f"{prefix}-{part.name}-choice") + ".en").set_value(value)
            continue
        rows = [[selftest.format_cell(x) for x in row] for row in part.reference]
        if mode == "wrong" and n == 0:
            rows[0][0] = selftest.format_cell(float(part.reference[0, 0]) + 3) if part.reference[0, 0] > -1e300 \
                else "1"
        elif mode == "malformed" and n == 0:
            rows[0][0] = "abc"
        at.text_area(key=paste_key(prefix, part.name)).input("" if mode == "blank" else _grid_text(rows))


def on_page(at: AppTest, a: storage.Assignment, items) -> list[int]:
    """The item positions whose answer inputs the page shows now."""
    keys = {str(w.key) for kind in ("text_area", "radio") for w in at.get(kind)}
    return [i for i in range(len(items)) if any(k.startswith(f"asg-{i}-") for k in keys)]


def goto(at: AppTest, a: storage.Assignment, items, index: int) -> None:
    """Turn pages (Previous / Next) until item `index` is shown."""
    for _ in range(len(items)):
        shown = on_page(at, a, items)
        if index in shown:
            return
        button(at, "Next exercises" if index > shown[-1] else "Previous exercises").click().run()
        assert not at.exception
    raise AssertionError(f"item {index} never shown")


def test_an_assignment_with_every_kind_is_submitted_right_wrong_blank_and_malformed(db):
    """Concepts' chosen option (an int) was walked as a grid: Submit crashed with a TypeError."""
    import exercises

    kinds = list(exercises.KINDS)
    rows = [{"kind": k, "level": list(exercises.KINDS[k].LEVELS)[0], "count": 1} for k in kinds]
    rows.append({"kind": "concepts", "level": list(exercises.KINDS["concepts"].LEVELS)[0], "count": 1})
    created = service_assignments.create("Everything", rows, 3)
    a, key = created.assignment, created.teacher_key
    at = student_opens(a.code, "Ada")
    items = submissions.exercises_for(a, "Ada")
    assert [ex.kind for ex in items] == [*kinds, "concepts"]
    modes = ["right" if ex.kind == "concepts" and i < len(kinds) else
             "wrong" if ex.kind == "concepts" else ["right", "wrong", "blank"][i % 3]
             for i, ex in enumerate(items)]
    malformed = [i for i, ex in enumerate(items) if i % 4 == 3 and not any(p.is_choice for p in ex.parts)]
    assert malformed
    pages = submissions.pages(items)
    assert len(pages) > 1, "a long set is shown a page at a time"
    for p, shown in enumerate(pages):
        assert on_page(at, a, items) == shown
        for i in shown:
            _fill(at, item_prefix(at, a, i, items[i]), items[i], "malformed" if i in malformed else modes[i])
        if p < len(pages) - 1:
            button(at, "Next exercises").click().run()
            assert not at.exception
    at.checkbox(key=f"assign.allow_blank.{a.code}").check()
    submit(at)
    assert "could not be read (exercises " + ", ".join(str(i + 1) for i in malformed) in texts(at)
    assert storage.list_submissions(db, a.code, key) == []  # nothing stored while something is unreadable
    assert malformed[0] in on_page(at, a, items), "the first page with something to fix is shown"
    for i in malformed:
        goto(at, a, items, i)
        _fill(at, item_prefix(at, a, i, items[i]), items[i], modes[i])
    submit(at)
    assert "Submitted. Your score:" in texts(at), [e.value for e in at.error]
    subs = storage.list_submissions(db, a.code, key)
    assert [s.item_index for s in subs] == list(range(len(items)))
    for s, mode in zip(subs, modes):
        if mode == "right":
            assert s.score == 1.0, (s.kind, s.answer)
        elif mode == "wrong":
            assert s.score is not None and s.score < 1.0 and s.answer is not None, (s.kind, s.answer)
        else:
            assert s.answer is None and s.score == 0.0, s.kind


def test_no_seed_in_any_widget_key_a_student_sees(db):
    """Widget keys carried each item's seed (st-key-asg-CODE-0-softmax-L2-s…): /practice?seed=… then
    showed the student's problem with its solution."""
    code, _ = create(page(ASSIGNMENTS), "Leaks", [("softmax", 2, 1), ("concepts", 1, 1)], per_student=True)
    a = storage.get_assignment(db, code)
    at = student_opens(code, "Ada")
    seeds = [str(ex.seed) for ex in stored(a, "Ada")]
    keys = [str(w.key) for kind in ("text_area", "text_input", "radio", "checkbox", "button")
            for w in at.get(kind)]
    assert any(k.startswith("asg-0-") for k in keys)
    assert not [k for k in keys if any(s in k for s in seeds)], "a seed in a widget key"
    assert not [k for k in keys if "-s" in k and "-L" in k], "an exercise id in a widget key"


# ---------------------------------------------------------------- identity, attempts, rules, dashboard


def _wrong_everywhere(at: AppTest, a: storage.Assignment, name: str | None) -> None:
    for index, ex in enumerate(stored(a, name)):
        for part in ex.parts:
            rows, cols = part.shape
            at.text_area(key=paste_key(item_prefix(at, a, index, ex), part.name)).input(
                "\n".join(", ".join(["7"] * cols) for _ in range(rows)))


def test_one_attempt_means_one_even_after_the_solutions_and_a_reload(db):
    """A student opened every solution, reopened the link and submitted 100%; only that was kept."""
    code, key = create(page(ASSIGNMENTS), "Once", [("scaling", 1, 1)], allow_solutions=True)
    a = storage.get_assignment(db, code)
    assert a.rules.attempts == 1
    at = student_opens(code, "Bob")
    _wrong_everywhere(at, a, "Bob")
    submit(at)
    assert "Submitted. Your score: 0%." in texts(at)
    button(at, "Show solution").click().run()
    assert not any(b.label == "Submit another attempt" for b in at.button)
    again = student_opens(code, "bob")  # a fresh browser session, the same name
    assert "Submitted so far: 1. Attempts left: 0." in texts(again)
    assert "You have used all your attempts (1)." in texts(again)
    assert not any(b.label == "Submit my answers" for b in again.button)
    assert [s.score for s in storage.list_submissions(db, code, key)] == [0.0]


def test_a_class_list_gives_personal_links_and_no_one_else_submits(db):
    """Anyone could type a classmate's name, see their variant and overwrite their grade."""
    at = page(ASSIGNMENTS)
    at.text_area(key="assign.roster").input("Ada Lovelace\nAlan Turing")
    code, key = create(at, "Roster", [("scores", 1, 1)], per_student=True)
    links = at.session_state[ui_assignments.CREATED]["links"]
    assert set(links) == {"Ada Lovelace", "Alan Turing"} and at.get("table")
    nobody = page(ASSIGNMENTS, {"assignment": code})
    assert "open the personal link" in texts(nobody) and not at.get("text_input") == []
    assert not any(b.label == "Start" for b in nobody.button)
    forged = page(ASSIGNMENTS, {"assignment": code, "t": "x" * 22})
    assert "not (or no longer) valid" in forged.error[0].value and not forged.exception
    ada = page(ASSIGNMENTS, {"assignment": code, "t": links["Ada Lovelace"]})
    assert "Working as **Ada Lovelace**." in texts(ada)
    a = storage.get_assignment(db, code)
    type_answers(ada, a, "Ada Lovelace", [selftest.correct_answer(stored(a, "Ada Lovelace")[0])])
    submit(ada)
    assert "Submitted. Your score: 100%." in texts(ada)
    with pytest.raises(storage.Refused):
        storage.record_submissions(db, code, "Mallory", [{"item_index": 0, "kind": "scores", "level": 1,
                                                          "seed": 1, "answer": None, "score": 0.0}])
    book = storage.gradebook(db, code, key)
    assert book.students == ("Ada Lovelace",) and book.roster == ("Ada Lovelace", "Alan Turing")


def test_a_late_or_closed_submission_is_refused_clearly_and_keeps_the_answers(db):
    code, key = create(page(ASSIGNMENTS), "Late", [("scores", 1, 1)])
    a = storage.get_assignment(db, code)
    at = student_opens(code, "Ada")
    _wrong_everywhere(at, a, None)
    storage.update_assignment(db, code, key, rules={**a.rules.to_dict(), "closed": True})
    submit(at)
    assert "This assignment is closed: your teacher no longer takes submissions." in texts(at)
    assert storage.list_submissions(db, code, key) == []
    box = at.text_area(key=paste_key(item_prefix(at, a, 0, None), "scores"))
    assert box.value and "7" in box.value  # nothing lost
    storage.update_assignment(db, code, key, rules={**a.rules.to_dict(), "deadline": "2020-01-01T00:00:00+00:00"})
    late = student_opens(code, "Alan")
    assert "The deadline (2020-01-01 00:00 UTC) has passed" in texts(late) and not late.exception
    assert not any(b.label == "Submit my answers" for b in late.button)


def test_pressing_create_twice_makes_one_assignment(db):
    """Pressing Create twice silently made a second assignment and replaced the key on screen."""
    at = page(ASSIGNMENTS)
    code, key = create(at, "Twice", [("scores", 1, 1)])
    button(at, "Create assignment").click().run()
    assert "pressing Create again made no second one" in texts(at)
    assert at.session_state[ui_assignments.CREATED]["key"] == key
    with db.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(storage.db.assignments)).scalar() == 1


def test_the_dashboard_lists_edits_and_deletes_a_keys_assignments(db):
    """After a reload the teacher had no list of their assignments and no way to get the sheets."""
    code, key = create(page(ASSIGNMENTS), "First", [("scores", 1, 1)])
    at = page(ASSIGNMENTS)
    at.text_input(key="assign.owner_key").input(key)
    second, _ = create_with_key(at, "Second")
    at = page(ASSIGNMENTS)  # a reload: nothing in the session
    at.text_input(key="assign.dash_key").input(key)
    button(at, "Show my assignments").click().run()
    assert not at.exception
    labels = [e.label for e in at.get("expander")]
    assert any(code in lbl for lbl in labels) and any(second in lbl for lbl in labels)
    assert len([b for b in at.get("download_button")]) >= 4  # the sheets of both, again
    button_by_key(at, f"assign.toggle.{code}").click().run()
    assert storage.get_assignment(db, code).rules.closed
    at.checkbox(key=f"assign.del_sure.{second}").check().run()
    button_by_key(at, f"assign.del.{second}").click().run()
    assert storage.get_assignment(db, second) is None and storage.get_assignment(db, code) is not None


def create_with_key(at: AppTest, title: str) -> tuple[str, None]:
    at.text_input(key="assign.title").input(title)
    button(at, "Create assignment").click().run()
    assert not at.exception
    code = at.session_state[ui_assignments.CREATED]["code"]
    assert at.session_state[ui_assignments.CREATED]["key"] is None  # the teacher has it already
    return code, None


def button_by_key(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def test_exam_mode_hides_marks_until_released_and_offers_no_solutions(db):
    rules = {"attempts": 2, "exam": True, "release": "manual"}
    created = service_assignments.create("Exam", [{"kind": "scaling", "level": 1}], 2,
                                         allow_solutions=True, rules=rules)
    a, key = created.assignment, created.teacher_key
    at = student_opens(a.code, "Ada")
    assert "exam mode" in texts(at)
    type_answers(at, a, "Ada", [selftest.correct_answer(stored(a)[0])])
    submit(at)
    assert "Your marks will be shown when your teacher releases them." in texts(at)
    assert "Your score" not in texts(at) and not any(b.label == "Show solution" for b in at.button)
    storage.update_assignment(db, a.code, key, rules={**rules, "released": True})
    back = student_opens(a.code, "Ada", browser="another", taken=True)  # another browser: the name is Ada's
    assert "Your score" not in texts(back)
    at.run()  # released, but an exam without a class list still taking answers: no marks yet
    assert "Your score" not in texts(at)
    storage.update_assignment(db, a.code, key, rules={**rules, "released": True, "closed": True})
    at.run()  # Ada's own session, released after the exam: her marks
    assert "Submitted. Your score: 100%." in texts(at)
    assert not any(b.label == "Show solution" for b in at.button)  # never in an exam


def test_the_gradebook_page_shows_statistics_blank_items_and_who_has_not_submitted(db):
    created = service_assignments.create("Stats", [{"kind": "scores", "level": 1, "count": 2}], 2)
    a, key = created.assignment, created.teacher_key
    service_assignments.set_roster(a, key, "Ada\nAlan\nGrace")
    ada = page(ASSIGNMENTS, {"assignment": a.code, "t": "unused"})
    assert "not (or no longer) valid" in texts(ada)
    items = stored(a)
    submissions.submit(a, "Ada", items, submissions.grade_all(items, {0: selftest.correct_answer(items[0])},
                                                              allow_blank=True))
    book = open_gradebook(a.code, key)
    assert "Not submitted yet: Alan, Grace" in texts(book)
    frame = book.dataframe[0].value
    assert frame["Left blank"].tolist()[0] == "2" and frame["Total"].tolist()[0] == 50.0
    assert frame["Student"].tolist() == ["Ada", "Alan", "Grace"]  # everyone on the class list is a row
    assert "Item statistics" in texts(book) and "Discrimination" in book.dataframe[1].value.columns
    cells = book.dataframe[2].value
    assert "blank" in cells["Mark"].tolist() and "right" in cells["Mark"].tolist()


# ---------------------------------------------------------------- long sets, a page at a time


def _inputs(at: AppTest) -> int:
    return sum(len(at.get(kind)) for kind in ("text_input", "text_area", "radio"))


def test_a_forty_item_set_opens_within_the_server_time_a_page_at_a_time(db):
    """A 40-item assignment drew every item's ~2,800 widgets at once and took 7.4 s of server time to
    open (≤ 1.5 s); Streamlit's cost per input grows with the inputs on the page."""
    import time

    rows = [{"kind": "attention", "level": 2, "count": 10}, {"kind": "backprop", "level": 2, "count": 10},
            {"kind": "masking", "level": 3, "count": 10}, {"kind": "softmax", "level": 2, "count": 10}]
    a = service_assignments.create("Forty", rows, 5, rules={"attempts": 0}).assignment
    assert a.item_count == 40
    items = submissions.exercises_for(a)  # the class's set is stored with the assignment: nothing generated here
    largest = max(submissions.widget_count(ex) for ex in items)
    assert sum(submissions.widget_count(ex) for ex in items) > 10 * largest
    at = page(ASSIGNMENTS, {"assignment": a.code})
    at.text_input(key=f"assign.name_input.{a.code}").input("Ada")
    cpu = time.process_time()
    button(at, "Start").click().run()
    cpu = time.process_time() - cpu
    assert not at.exception
    assert _inputs(at) <= largest + 3, "only one page's inputs are drawn"
    assert f"Exercises 1–1 of 40 · page 1 of {len(submissions.pages(items))}" in texts(at)
    assert cpu <= 1.5, f"{cpu:.2f} s of CPU to open the set"


def test_turning_pages_keeps_what_was_typed_and_submit_takes_every_page(db):
    created = service_assignments.create("Pages", [{"kind": "softmax", "level": 3, "count": 3}], 8)
    a = created.assignment
    items = submissions.exercises_for(a)
    assert submissions.pages(items) == [[0], [1], [2]]
    at = student_opens(a.code, "Ada")
    answers = [selftest.correct_answer(ex) for ex in items]
    for index in range(3):
        assert on_page(at, a, items) == [index]
        for part, text in answers[index].items():
            at.text_area(key=paste_key(item_prefix(at, a, index, items[index]), part)).input(text)
        if index < 2:
            button(at, "Next exercises").click().run()
    button(at, "Previous exercises").click().run()
    button(at, "Previous exercises").click().run()
    assert on_page(at, a, items) == [0]
    for part, text in answers[0].items():  # typed two pages ago, shown again
        assert at.text_area(key=paste_key(item_prefix(at, a, 0, items[0]), part)).value == text
    submit(at)
    assert "Submitted. Your score: 100%." in texts(at)
    subs = storage.list_submissions(db, a.code, created.teacher_key)
    assert [s.score for s in subs] == [1.0, 1.0, 1.0]


def _dashboard(key: str) -> AppTest:
    at = page(ASSIGNMENTS)
    at.text_input(key="assign.dash_key").input(key)
    button(at, "Show my assignments").click().run()
    assert not at.exception
    return at


def test_the_dashboard_edits_opening_exam_time_limit_and_items_by_the_rule(db):
    """The dashboard edited title, attempts and deadline only: no opening time, exam mode, time limit or
    items."""
    created = service_assignments.create("Quiz", [{"kind": "scores", "level": 1, "count": 1}], 3)
    a, key = created.assignment, created.teacher_key
    at = _dashboard(key)
    at.checkbox(key=f"assign.edit_opens.{a.code}.on").check().run()  # the pickers and exam settings show once ticked
    at.checkbox(key=f"assign.edit_exam.{a.code}").check().run()
    at.number_input(key=f"assign.edit_limit.{a.code}").set_value(25)
    button_by_key(at, f"assign.edit_save.{a.code}").click().run()
    assert not at.exception
    r = storage.get_assignment(db, a.code).rules
    assert r.exam and r.time_limit == 25 and r.opens_at is not None
    at = _dashboard(key)
    at.number_input(key=f"assign.items_count.{a.code}.1").set_value(2)  # the empty row: add 2 of its kind
    at.selectbox(key=f"assign.items_kind.{a.code}.1.en").set_value("softmax")
    at.number_input(key=f"assign.items_level.{a.code}.1").set_value(2)
    button_by_key(at, f"FormSubmitter:assign.items.{a.code}-Save the exercises").click().run()
    assert not at.exception and not at.error
    a = storage.get_assignment(db, a.code)
    assert [(i.kind, i.level, i.count) for i in a.items] == [("scores", 1, 1), ("softmax", 2, 2)]
    ada = student_opens(a.code, "Ada")  # a student has started
    assert not ada.exception
    at = _dashboard(key)
    assert at.number_input(key=f"assign.items_count.{a.code}.0").disabled  # what Ada saw is read-only
    assert not at.number_input(key=f"assign.items_count.{a.code}.2").disabled  # a row to add one
    with pytest.raises(service_assignments.Locked):  # and the service refuses it all the same
        service_assignments.update(a, key, items=[{"kind": "softmax", "level": 2, "count": 2}])
    assert storage.get_assignment(db, a.code).items == a.items


def test_the_teacher_merges_or_renames_same_name_duplicates_on_the_gradebook(db):
    """Two browsers typing "Ada" in an open assignment were flagged, with no way to resolve it."""
    created = service_assignments.create("Open", [{"kind": "scaling", "level": 1}], 2, rules={"attempts": 0})
    a, key = created.assignment, created.teacher_key
    _same_name_from_before(db, a, ("Ada", "ada", "Ada"))
    book = open_gradebook(a.code, key)
    assert book.dataframe[0].value.iloc[:, 0].tolist() == ["Ada", "ada (2)", "Ada (3)"]
    assert any("Same name: Ada" in e.label for e in book.get("expander"))
    book.selectbox(key=next(k for k in book.session_state if k.startswith("gradebook.into."))).set_value(0)
    button(book, "Merge into this one").click().run()
    assert not book.exception
    assert book.dataframe[0].value.iloc[:, 0].tolist() == ["Ada"]
    assert book.dataframe[0].value.iloc[0].tolist()[-4] == 3, "one person with three attempts"
    assert len(storage.list_submissions(db, a.code, key)) == 3


def _same_name_from_before(db, a: storage.Assignment, names: tuple[str, ...]) -> None:
    """Submissions of one name from several browser sessions, as stored before a name was held by the
    first browser to type it: the duplicates the teacher resolves on the gradebook."""
    [ex] = stored(a)
    for n, name in enumerate(names):
        storage.record_submissions(
            db, a.code, name, [{"item_index": 0, "kind": ex.kind, "level": ex.level,
                                                   "seed": ex.seed, "answer": None, "score": 0.0,
                                                   "exercise": ex, "version": ex.version}],
            person=f"s:{n}:{name.casefold()}")


def test_renaming_a_duplicate_tells_them_apart(db):
    created = service_assignments.create("Open", [{"kind": "scaling", "level": 1}], 2, rules={"attempts": 0})
    a, key = created.assignment, created.teacher_key
    _same_name_from_before(db, a, ("Ada", "Ada"))
    book = open_gradebook(a.code, key)
    book.selectbox(key=next(k for k in book.session_state if k.startswith("gradebook.who."))).set_value(1)
    book.text_input(key=next(k for k in book.session_state if k.startswith("gradebook.name."))).input("Ada B")
    button(book, "Rename").click().run()
    assert not book.exception
    assert book.dataframe[0].value.iloc[:, 0].tolist() == ["Ada", "Ada B"]
    assert not book.get("expander") or not any("Same name" in e.label for e in book.get("expander"))


def test_a_returning_student_in_a_new_browser_sees_counts_only(db):
    """A returning student sees what they submitted and what is left; in an open assignment a
    name is no proof of who it is: another browser typing the same name (any letter case) is refused,
    never shown the answers, and never uses up her attempts."""
    created = service_assignments.create("Open", [{"kind": "scaling", "level": 1}], 2, rules={"attempts": 3})
    a = created.assignment
    ada = student_opens(a.code, "Ada")
    answer = selftest.correct_answer(stored(a)[0])
    type_answers(ada, a, "Ada", [answer])
    submit(ada)
    button(ada, "Submit another attempt").click().run()
    assert any("Your last submission" in e.label for e in ada.get("expander")), "her own browser: her answers"
    again = student_opens(a.code, "Ada")  # her browser, a new session: her answers
    assert "Submitted so far: 1. Attempts left: 2." in texts(again)
    assert any("Your last submission" in e.label for e in again.get("expander"))
    other = student_opens(a.code, "ada", browser="someone else", taken=True)
    assert not any("Your last submission" in e.label for e in other.get("expander"))
    shown = [w.value for kind in ("text_input", "text_area") for w in other.get(kind)
             if w.key != f"assign.name_input.{a.code}"]  # the name they typed stays in its box
    assert not any(v and v.strip() for v in shown if isinstance(v, str)), "no answer of Ada's in the page"
    assert "Your score" not in texts(other)
    assert [s.score for s in storage.list_submissions(db, a.code, created.teacher_key)] == [1.0]


def test_released_exam_marks_name_no_mistake_and_no_sanity_check(db):
    """Exam mode: no hints or sanity warnings; released marks showed the feedback's 'Likely
    mistake' and sanity checks, which help with the attempt still left."""
    rules = {"attempts": 2, "exam": True, "release": "manual", "released": True}
    created = service_assignments.create("Exam", [{"kind": "softmax", "level": 2}], 4, rules=rules)
    a = created.assignment
    [ex] = stored(a)
    part = ex.parts[0].name
    _mid, text = mistaken_answer(ex, part)
    links = storage.set_roster(db, a.code, created.teacher_key, ["Ada", "Bob"])  # an exam's marks: class list only
    at = page(ASSIGNMENTS, {"assignment": a.code, "t": links["Ada"]})
    at.text_area(key=paste_key(item_prefix(at, a, 0, ex), part)).input(text)
    submit(at)
    shown = texts(at)
    assert "Score " in shown and "Likely mistake" not in shown and "Sanity check" not in shown
    practice = service_assignments.update(a, created.teacher_key, rules={**rules, "exam": False})
    again = page(ASSIGNMENTS, {"assignment": a.code, "t": links["Bob"]})
    again.text_area(key=paste_key(item_prefix(again, practice, 0, ex), part)).input(text)
    submit(again)
    assert "Likely mistake" in texts(again), "outside an exam the feedback names the mistake"


@pytest.mark.parametrize("hostile", ["[Log in here](https://evil.example/x)", r"$\kern-60em\rule{99em}{9em}$",
                                     ":red[**loud**] :material/warning: `code`"])
def test_a_hostile_name_typed_twice_is_shown_literally_where_it_is_resolved(db, hostile):
    from tests.test_hostile import assert_literal

    created = service_assignments.create("Open", [{"kind": "scores", "level": 1}], 2, rules={"attempts": 0})
    a, key = created.assignment, created.teacher_key
    for person in ("s:one:x", "s:two:x"):
        storage.record_submissions(db, a.code, hostile, [{"item_index": 0, "kind": "scores", "level": 1, "seed": 3,
                                                          "answer": {"scores": "1"}, "score": 1.0}], person=person)
    book = AppTest.from_file(GRADEBOOK, default_timeout=60)
    book.session_state["gradebook.auth"] = (a.code, key)
    book.run()
    assert any("Same name" in e.label for e in book.get("expander"))
    assert_literal(book, hostile, echoed=len(hostile))


def test_a_name_taken_by_another_browser_goes_to_the_teachers_list_who_releases_it(db):
    """Another browser typing a classmate's name first used up the classmate's one attempt.
    Now the first browser holds the name, the second is refused, and the teacher decides."""
    created = service_assignments.create("Open", [{"kind": "scaling", "level": 1}], 2, rules={"attempts": 1})
    a, key = created.assignment, created.teacher_key
    squatter = student_opens(a.code, "Ada Lovelace", browser="squatter")
    _wrong_everywhere(squatter, a, "Ada Lovelace")
    submit(squatter)
    ada = student_opens(a.code, "ADA LOVELACE", browser="ada", taken=True)
    book = open_gradebook(a.code, key)
    assert any("Names taken by another browser: 1" in e.label for e in book.get("expander"))
    assert "**ADA LOVELACE** (held as Ada Lovelace)" in texts(book)
    button(book, "Release the name").click().run()
    assert not book.exception and not any("Names taken" in e.label for e in book.get("expander"))
    ada = student_opens(a.code, "ADA LOVELACE", browser="ada")
    assert "You have used all your attempts" not in texts(ada)
    type_answers(ada, a, "ADA LOVELACE", [selftest.correct_answer(stored(a)[0])])
    submit(ada)
    assert "Submitted. Your score: 100%." in texts(ada)
    assert sorted(s.score for s in storage.list_submissions(db, a.code, key)) == [0.0, 1.0]  # both kept


def test_a_throwaway_name_on_an_exam_sees_no_score_and_no_marked_grid(db):
    """A throwaway name saw "Your score: 0%" and the marked grid after its final attempt, and
    the real name then scored 100 %."""
    rules = {"attempts": 1, "exam": True, "release": "final"}
    created = service_assignments.create("Exam", [{"kind": "scaling", "level": 1}], 2, rules=rules)
    a = created.assignment
    at = student_opens(a.code, "Throwaway")
    _wrong_everywhere(at, a, "Throwaway")
    submit(at)
    assert "Your score" not in texts(at) and "Your marks will be shown when your teacher releases them." in texts(at)
    assert not any(getattr(e, "value", "").startswith("Score ") for e in at.get("caption"))
    again = student_opens(a.code, "Throwaway")  # a reload: the stored attempt, unmarked too
    assert "Your score" not in texts(again)


def test_a_planted_profile_cookie_does_not_hold_the_victims_name_for_its_maker(db):
    """A profile opened from a cookie this browser did not create (planted) is not trusted with names: the
    cookie's maker, in their own browser with the same profile, cannot then submit as the victim."""
    created = service_assignments.create("Open", [{"kind": "scaling", "level": 1}], 2, rules={"attempts": 1})
    a = created.assignment
    victim = page(ASSIGNMENTS, {"assignment": a.code})
    victim.session_state[PROFILE] = "p-test-planted"
    victim.session_state["progress.confirmed"] = False  # the cookie was issued to another browser
    victim.text_input(key=f"assign.name_input.{a.code}").input("Ada")
    button(victim, "Start").click().run()
    assert "Working as **Ada**." in texts(victim)
    student_opens(a.code, "Ada", browser="planted", taken=True)  # the maker's own browser, same profile


# ---------------------------------------------------------------- the teacher's forms say what applies


@pytest.mark.parametrize("lang, label, refusal", [
    ("en", "Teacher key from an earlier assignment", "A teacher key cannot be made up"),
    ("zh", "之前作业的教师密钥", "教师密钥不能自己编")])
def test_the_builders_key_is_one_the_app_gave_and_a_made_up_one_is_refused_saying_so(db, lang, label, refusal):
    """"Your teacher key (optional …)" read as a password to choose, and a made-up one was refused as
    "not a teacher key"."""
    at = AppTest.from_file(ASSIGNMENTS, default_timeout=60)
    at.session_state["lang"] = lang
    at.run()
    box = at.text_input(key="assign.owner_key")
    assert box.label.startswith(label), f"{lang}: the key box says it is the key the app gave: {box.label!r}"
    assert ("Leave the box empty to get a new key" if lang == "en" else "留空则生成新的密钥") in box.help
    if lang != "en":  # AppTest formats a selectbox's options in English on the test's side: the text alone
        assert refusal in msg("assign.error.owner_key").render(lang)
        return
    at.text_input(key="assign.title").input("Week 1")
    box.input("my secret password")
    next(b for b in at.button if b.key == "assign.create").click().run()
    assert not at.exception and not at.code, f"{lang}: a made-up key made an assignment"
    assert refusal in at.error[0].value, f"{lang}: the refusal says a key cannot be made up: {at.error[0].value!r}"


def test_a_gradebook_opened_once_opens_again_in_the_session_without_its_key(db):
    """The gradebook asked for the key every time: from the dashboard's link and for each reopening."""
    first = service_assignments.create("First", [{"kind": "scores", "level": 1}], 2)
    key = first.teacher_key
    second = service_assignments.create("Second", [{"kind": "scores", "level": 1}], 3, teacher_key=key)
    for a in (first.assignment, second.assignment):
        storage.record_submission(db, a.code, "Ada", 0, "scores", 1, 1, {"scores": "1"}, 1.0, None)
    at = open_gradebook(first.assignment.code, key)
    assert at.dataframe, "the first gradebook opens with its key"
    at.query_params["code"] = second.assignment.code  # another gradebook: its key is asked for once
    at.run()
    assert not at.dataframe and at.get("form")
    at.text_input(key="gradebook.code").input(second.assignment.code)
    at.text_input(key="gradebook.key").input(key)
    button(at, "Open gradebook").click().run()
    assert "Second" in texts(at)
    at.query_params["code"] = first.assignment.code  # back to the first: no key asked
    at.run()
    assert not at.get("form") and "First" in texts(at), "a gradebook opened in this session asked for its key again"
    assert all(key not in str(v) for v in at.query_params.values()), "the key never goes into the address"

    # from the dashboard (one key, many assignments) the link opens the gradebook without asking
    app = open_page("app_pages/assignments.py")
    app.text_input(key="assign.dash_key").input(key)
    button(app, "Show my assignments").click().run()
    links = [e for e in app.get("page_link") if second.assignment.code in str(e.proto.query_string)]
    assert links, "the dashboard links to the gradebook inside the app (a plain link starts a new session)"
    app.query_params["code"] = second.assignment.code
    app.switch_page("app_pages/gradebook.py").run()
    assert not app.exception and not app.get("form") and app.dataframe, "the dashboard's key opened its gradebook"
    button(app, "Close").click().run()
    assert app.get("form"), "Close forgets the key"


def _dash_item_widgets(at: AppTest, code: str) -> dict[str, list]:
    return {kind: [w for w in at.get(kind) if code in str(w.key)] for kind in
            ("date_input", "time_input", "selectbox", "number_input", "text_area")}


def test_the_edit_form_shows_only_what_applies_and_fixed_rows_read_only(db):
    """The edit form showed date pickers for switched-off dates, exam-only settings with exam mode off,
    editable-looking rows after submissions, and an empty class list with 3 students on it."""
    created = service_assignments.create("Quiz", [{"kind": "scores", "level": 1, "count": 1}], 3)
    a, key = created.assignment, created.teacher_key
    service_assignments.set_roster(a, key, "Ada\nAlan\nGrace")
    at = _dashboard(key)
    widgets = _dash_item_widgets(at, a.code)
    assert not widgets["date_input"] and not widgets["time_input"], "no pickers for dates that are off"
    assert not any(w.key.startswith(f"assign.edit_limit.{a.code}") or w.key.startswith(f"assign.edit_release.{a.code}")
                   for w in widgets["number_input"] + widgets["selectbox"]), "no exam settings with exam mode off"
    assert at.text_area(key=f"assign.roster_text.{a.code}").value == "Ada\nAlan\nGrace", "the class list as it is"
    at.checkbox(key=f"assign.edit_deadline.{a.code}.on").check().run()
    assert len(_dash_item_widgets(at, a.code)["date_input"]) == 1, "ticking the deadline shows its picker"
    at.checkbox(key=f"assign.edit_exam.{a.code}").check().run()
    assert at.number_input(key=f"assign.edit_limit.{a.code}"), "exam mode shows its time limit"

    assert all(not w.disabled for w in _dash_item_widgets(at, a.code)["number_input"]
               if w.key.startswith("assign.items_")), "nobody started: the rows are editable"
    items = stored(a)
    submissions.submit(a, "Ada", items, submissions.grade_all(items, {0: selftest.correct_answer(items[0])},
                                                              allow_blank=False))
    at = _dashboard(key)
    rows = [w for kind in ("selectbox", "number_input") for w in at.get(kind) if str(w.key).startswith("assign.items_")]
    assert rows and all(w.disabled for w in rows), "after a submission every exercise row is read-only"
    assert len(rows) == 3, "and no empty row to add one"
    assert button_by_key(at, f"FormSubmitter:assign.items.{a.code}-Save the exercises").disabled
    assert "the exercises are fixed" in texts(at)


def test_one_blank_exercise_is_named_in_the_singular(db):
    """"Exercises 1 have no answer yet"."""
    code, _ = create(page(ASSIGNMENTS), "Careful", [("scores", 1, 2)])
    a = storage.get_assignment(db, code)
    at = student_opens(code, "Ada")
    type_answers(at, a, "Ada", [selftest.correct_answer(stored(a)[0]), {"scores": ""}])
    submit(at)
    assert "Exercise 2 has no answer yet. Fill it in," in texts(at), texts(at)
    type_answers(at, a, "Ada", [{"scores": ""}, {"scores": ""}])
    submit(at)
    assert "Exercises 1, 2 have no answer yet. Fill them in," in texts(at)
    assert plural("assign.blank_items", 1, items="2").render("zh").startswith("第 2 题还没有答案。把它填上")


def test_no_discrimination_index_from_fewer_than_five_students(db):
    """Discrimination 1.00 from 2 students."""
    created = service_assignments.create("Stats", [{"kind": "scores", "level": 1, "count": 3}], 2,
                                         rules={"attempts": 0})
    a, key = created.assignment, created.teacher_key
    items = stored(a)
    right = {i: selftest.correct_answer(ex) for i, ex in enumerate(items)}
    solved = [(0, 1, 2), (0,), (0, 1), (1,), (2,)]  # which items each student got right (the others blank)
    for n, name in enumerate(["Ada", "Alan", "Grace", "Edsger", "Barbara"]):
        answers = {i: right[i] for i in solved[n]}
        submissions.submit(a, name, items, submissions.grade_all(items, answers, allow_blank=True), person=f"p{n}")
        book = open_gradebook(a.code, key)
        shown = book.dataframe[1].value["Discrimination"]
        if n + 1 < 5:
            assert shown.isna().all(), f"{n + 1} students: no discrimination index, got {shown.tolist()}"
            assert f"at least 5 students who submitted ({n + 1} so far)" in texts(book)
        else:
            assert shown.notna().any(), "5 students: the index is shown"
            assert "point-biserial" in texts(book)


# ---------------------------------------------------------------- the gradebook's CSV: everyone expected


def _gradebook_csv(book: AppTest) -> pd.DataFrame:
    download = next(d for d in book.get("download_button") if d.key == "gradebook.csv")
    csv = RecordingStorage.files[download.proto.url.rsplit("/", 1)[1].split(".")[0]]
    return pd.read_csv(io.BytesIO(csv), encoding="utf-8-sig", keep_default_na=False)


def test_the_gradebook_csv_has_a_row_for_every_student_on_the_class_list(db):
    """The CSV left out the students who had not submitted."""
    created = service_assignments.create("Listed", [{"kind": "scores", "level": 1, "count": 2}], 2)
    a, key = created.assignment, created.teacher_key
    service_assignments.set_roster(a, key, "Ada\nAlan\nGrace")
    items = stored(a)
    submissions.submit(a, "Alan", items, submissions.grade_all(items, {0: selftest.correct_answer(items[0])},
                                                               allow_blank=True))
    book = open_gradebook(a.code, key)
    exported = _gradebook_csv(book)
    assert sorted(exported["Student"]) == ["Ada", "Alan", "Grace"], f"class list Ada, Alan, Grace: {exported}"
    waiting = exported[exported["Student"] != "Alan"]
    item_columns = ["Total", "1. Scores Q Kᵀ (L1)", "2. Scores Q Kᵀ (L1)"]
    assert (waiting[item_columns] == "").all().all(), f"blank scores for who has not submitted: {waiting}"
    assert waiting["Attempts"].tolist() == [0, 0]
    assert exported.loc[exported["Student"] == "Alan", "Total"].tolist() == ["50.0"]
    assert book.dataframe[0].value["Student"].tolist() == exported["Student"].tolist(), "the page's table is the CSV"


def test_the_gradebook_csv_has_a_row_for_a_typed_name_without_a_submission(db):
    """An open assignment: a student who typed their name but has not submitted is a row too."""
    created = service_assignments.create("Open", [{"kind": "scaling", "level": 1}], 2, rules={"attempts": 0})
    a, key = created.assignment, created.teacher_key
    ada = student_opens(a.code, "Ada")
    type_answers(ada, a, "Ada", [selftest.correct_answer(stored(a)[0])])
    submit(ada)
    student_opens(a.code, "Alan Turing")  # typed the name, still working
    book = open_gradebook(a.code, key)
    exported = _gradebook_csv(book)
    assert exported["Student"].tolist() == ["Ada", "Alan Turing"], f"typed names are rows: {exported}"
    assert exported.iloc[1]["Total"] == "" and exported.iloc[1]["Attempts"] == 0
    assert "Not submitted yet: Alan Turing" in texts(book)
