"""Storage on SQLite and on a real PostgreSQL server (DATABASE_URL_TEST; see scripts/start_test_postgres.sh).

Under CI the PostgreSQL half must run: a missing or unreachable server fails these tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

import storage
from exercises.teacher.assignments import AssignmentError
from storage import db as storage_db

REPO_ROOT = Path(__file__).resolve().parent.parent
ITEMS = [{"kind": "softmax", "level": 2, "count": 2}, {"kind": "scores", "level": 1, "count": 1}]


def _postgres_url(started: str | None) -> str:
    url = os.environ.get("DATABASE_URL_TEST", "").strip() or (started or "")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no PostgreSQL server could be started: install Debian's postgresql "
                        "package (scripts/install_test_tools.sh) or set DATABASE_URL_TEST")
        pytest.skip("no PostgreSQL server (set DATABASE_URL_TEST or install Debian's postgresql package)")
    return storage_db.normalise_url(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path, throwaway_postgres):
    """A fresh empty database: a SQLite file, or a schema of its own on the PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.sqlite3'}"
        return
    base = sa.engine.make_url(_postgres_url(throwaway_postgres))
    admin = sa.create_engine(base, poolclass=sa.pool.NullPool)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    except sa.exc.OperationalError as err:
        pytest.fail(f"the PostgreSQL server at DATABASE_URL_TEST is not reachable: {err}")
    yield base.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    admin.dispose()


@pytest.fixture
def engine(db_url):
    eng = storage.open_engine(db_url)
    yield eng
    eng.dispose()


def _entry(index: int = 0, score: float | None = 1.0, misconception: str | None = None, **extra) -> dict:
    kind, level = ("scores", 1) if index == 2 else ("softmax", 2)
    return {"item_index": index, "kind": kind, "level": level, "seed": 100 + index,
            "answer": {"A": [["1", "0"], ["0.5", "0.5"]]}, "score": score, "misconception": misconception, **extra}


# ---------------------------------------------------------------- assignments and keys


def test_create_and_get_assignment(engine):
    created = storage.create_assignment(engine, "  Week   3 ", ITEMS, seed=7, per_student=True, allow_solutions=True)
    a = created.assignment
    assert len(a.code) == 8 and storage.parse_code(a.code) == a.code
    assert a.title == "Week 3" and a.item_count == 3 and a.per_student and a.allow_solutions
    got = storage.get_assignment(engine, f" {a.code[:4].lower()}-{a.code[4:].lower()} ")  # as a student might type it
    assert got == a
    assert [s.kind for s in got.spec.slots()] == ["softmax", "softmax", "scores"]
    assert storage.get_assignment(engine, "ZZZZZZZZ") is None
    for bad in ["", "abc", "0OIL0OIL", "'; DROP TABLE assignments; --", "X" * 500]:
        with pytest.raises(storage.MalformedCode):
            storage.get_assignment(engine, bad)


def test_bad_assignment_input_is_rejected_with_catalog_messages(engine):
    for title, items, seed in [("", ITEMS, 1), ("T", [], 1), ("T", [{"kind": "nope", "level": 1}], 1),
                               ("T", [{"kind": "softmax", "level": 9}], 1), ("T", ITEMS, -1), ("T", ITEMS, "x"),
                               ("T", [{"kind": "softmax", "level": 1, "count": 99}], 1)]:
        with pytest.raises(AssignmentError) as info:
            storage.create_assignment(engine, title, items, seed)
        assert info.value.message.key.startswith("assignment.error.")


def test_teacher_key_is_random_shown_once_and_stored_hashed(engine):
    one = storage.create_assignment(engine, "A", ITEMS, 1)
    two = storage.create_assignment(engine, "A", ITEMS, 1)
    assert one.teacher_key != two.teacher_key and one.assignment.code != two.assignment.code
    with engine.connect() as conn:
        hashes = conn.execute(sa.select(storage_db.assignments.c.key_hash)).scalars().all()
        dump = repr(conn.execute(sa.select(storage_db.assignments)).all())
    assert all(h.startswith("scrypt$") for h in hashes)
    assert one.teacher_key not in dump and two.teacher_key not in dump
    code = one.assignment.code
    assert storage.verify_teacher_key(engine, code, one.teacher_key)
    assert not storage.verify_teacher_key(engine, code, two.teacher_key)  # another assignment's key
    assert not storage.verify_teacher_key(engine, code, "")
    assert not storage.verify_teacher_key(engine, "ZZZZZZZZ", one.teacher_key)
    assert not storage.verify_teacher_key(engine, code, one.teacher_key + "' OR '1'='1")


def test_submissions_need_the_teacher_key(engine):
    created = storage.create_assignment(engine, "A", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    storage.record_submission(engine, code, "Ada", **_entry(0))
    assert [s.student for s in storage.list_submissions(engine, code, key)] == ["Ada"]
    other = storage.create_assignment(engine, "B", ITEMS, 1).teacher_key
    with pytest.raises(storage.AccessDenied):
        storage.list_submissions(engine, code, other)
    with pytest.raises(storage.AccessDenied):
        storage.gradebook(engine, code, other)
    with pytest.raises(storage.MalformedKey):
        storage.list_submissions(engine, code, "short")
    with pytest.raises(storage.UnknownAssignment):
        storage.gradebook(engine, "ZZZZZZZZ", key)


# ---------------------------------------------------------------- submissions and the gradebook


def test_gradebook_keeps_each_students_latest_answer(engine):
    created = storage.create_assignment(engine, "A", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    storage.record_submissions(engine, code, "Ada Lovelace", [_entry(0, 0.25, "no_exp"), _entry(1, 1.0)], t0)
    storage.record_submissions(engine, code, "Alan", [_entry(0, 0.5, "no_exp"), _entry(2, 0.0, "transposed_scores")],
                               t0 + timedelta(minutes=1))
    storage.record_submission(engine, code, "ada  LOVELACE", **_entry(0, 1.0), submitted_at=t0 + timedelta(minutes=2))
    book = storage.gradebook(engine, code, key)
    assert book.students == ("ada LOVELACE", "Alan")  # one person (no session given), under the name last typed
    # the latest attempt counts as a whole (an attempt is one press of Submit, not single cells)
    assert book.scores == {("ada LOVELACE", 0): 1.0, ("Alan", 0): 0.5, ("Alan", 2): 0.0}
    # mistakes over all attempts, the replaced one too (it vanished from the chart)
    assert book.misconceptions == {0: [("no_exp", 2)], 2: [("transposed_scores", 1)]}
    assert book.submitted_at["ada LOVELACE"] == t0 + timedelta(minutes=2)
    subs = storage.list_submissions(engine, code, key)
    assert len(subs) == 5 and subs[0].answer == _entry(0)["answer"] and subs[0].submitted_at == t0
    assert [s.attempt for s in subs] == [1, 1, 1, 1, 2] and len(book.rows) == 5  # every row kept


def test_two_people_typing_the_same_name_never_replace_each_other(engine):
    """A second browser typing "ADA   LOVELACE" replaced Ada's 100% with 0%."""
    created = storage.create_assignment(engine, "A", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    storage.record_submissions(engine, code, "Ada Lovelace", [_entry(0, 1.0)], person="session-1")
    storage.record_submissions(engine, code, "ADA   LOVELACE", [_entry(0, 0.0)], person="session-2")
    book = storage.gradebook(engine, code, key)
    assert book.students == ("Ada Lovelace", "ADA LOVELACE (2)")
    assert book.scores[("Ada Lovelace", 0)] == 1.0 and book.scores[("ADA LOVELACE (2)", 0)] == 0.0


def test_attempt_rules_are_enforced_in_the_transaction(engine):
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    rules = {"attempts": 2, "counts": "best", "opens_at": t0.isoformat(),
             "deadline": (t0 + timedelta(hours=1)).isoformat()}
    created = storage.create_assignment(engine, "A", ITEMS, 1, rules=rules)
    code, key = created.assignment.code, created.teacher_key
    for at, reason in [(t0 - timedelta(minutes=1), "not_open"), (t0 + timedelta(hours=2), "late")]:
        with pytest.raises(storage.Refused) as info:
            storage.record_submissions(engine, code, "Ada", [_entry(0, 1.0)], at)
        assert info.value.reason == reason
    storage.record_submissions(engine, code, "Ada", [_entry(0, 0.5)], t0 + timedelta(minutes=1))
    storage.record_submissions(engine, code, "ada", [_entry(0, 0.25)], t0 + timedelta(minutes=2))
    with pytest.raises(storage.Refused) as info:
        storage.record_submissions(engine, code, "ADA", [_entry(0, 1.0)], t0 + timedelta(minutes=3))
    assert info.value.reason == "no_attempts"
    book = storage.gradebook(engine, code, key)
    assert book.scores == {("ada", 0): 0.5}  # the best of the two counts; both kept
    assert len(storage.list_submissions(engine, code, key)) == 2
    storage.update_assignment(engine, code, key, rules={**rules, "closed": True})
    with pytest.raises(storage.Refused) as info:
        storage.record_submissions(engine, code, "Bob", [_entry(0, 1.0)], t0 + timedelta(minutes=4))
    assert info.value.reason == "closed"
    with pytest.raises(storage.Locked):
        storage.update_assignment(engine, code, key, items=ITEMS[:1])


def test_a_class_list_with_personal_links_stored_hashed(engine):
    created = storage.create_assignment(engine, "A", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    tokens = storage.set_roster(engine, code, key, ["Ada Lovelace", "Alan Turing"])
    with engine.connect() as conn:
        dump = repr(conn.execute(sa.select(storage_db.roster)).all())
    assert all(t not in dump for t in tokens.values())
    assert storage.student_for_token(engine, code, tokens["Alan Turing"]) == "Alan Turing"
    assert storage.student_for_token(engine, code, "x" * 22) is None
    with pytest.raises(storage.Refused) as info:
        storage.record_submissions(engine, code, "Mallory", [_entry(0, 1.0)])
    assert info.value.reason == "not_on_roster"
    storage.record_submissions(engine, code, "Ada Lovelace", [_entry(0, 1.0)])
    with pytest.raises(ValueError):  # services check the list first and say why in the teacher's language
        storage.set_roster(engine, code, key, ["Ada Lovelace", "ada  lovelace"])
    again = storage.set_roster(engine, code, key, ["Ada Lovelace", "Alan Turing"])
    assert storage.student_for_token(engine, code, tokens["Alan Turing"]) is None  # the old link expired
    assert storage.student_for_token(engine, code, again["Alan Turing"]) == "Alan Turing"
    assert storage.gradebook(engine, code, key).roster == ("Ada Lovelace", "Alan Turing")


def test_one_teacher_key_owns_many_assignments(engine):
    first = storage.create_assignment(engine, "A", ITEMS, 1)
    second = storage.create_assignment(engine, "B", ITEMS, 1, teacher_key=first.teacher_key, request_id="r1")
    again = storage.create_assignment(engine, "B", ITEMS, 1, teacher_key=first.teacher_key, request_id="r1")
    assert again.existing and again.assignment.code == second.assignment.code
    other = storage.create_assignment(engine, "C", ITEMS, 1)
    mine = storage.assignments_of(engine, first.teacher_key)
    assert {a.code for a in mine} == {first.assignment.code, second.assignment.code}
    storage.delete_assignment(engine, second.assignment.code, first.teacher_key)
    assert [a.code for a in storage.assignments_of(engine, first.teacher_key)] == [first.assignment.code]
    with pytest.raises(storage.AccessDenied):
        storage.delete_assignment(engine, other.assignment.code, first.teacher_key)


def test_bad_submissions_store_nothing(engine):
    created = storage.create_assignment(engine, "A", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    bad_batches = [[_entry(0), _entry(3)], [_entry(0), {**_entry(1), "kind": "scores"}],
                   [_entry(0), _entry(1, score=1.5)], [_entry(0), _entry(1, answer=float("nan"))], []]
    for batch in bad_batches:
        with pytest.raises(ValueError):
            storage.record_submissions(engine, code, "Ada", batch)
    for name in ["", "   ", "a\nb", "x" * 200]:
        with pytest.raises(AssignmentError):
            storage.record_submission(engine, code, name, **_entry(0))
    with pytest.raises(storage.UnknownAssignment):
        storage.record_submission(engine, "ZZZZZZZZ", "Ada", **_entry(0))
    assert storage.list_submissions(engine, code, key) == []  # each failed batch rolled back whole


def test_attempts_round_trip_in_time_order(engine):
    t0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    storage.record_attempt(engine, "me", "softmax", 2, 5, 0.5, "no_exp", 1, 40.0, t0 + timedelta(hours=1))
    storage.record_attempt(engine, "me", "scores", 1, 6, 1.0, None, 0, 12.5, t0)
    storage.record_attempt(engine, "you", "scores", 1, 6, None, None, 0, 3.0, t0.timestamp())
    mine = storage.list_attempts(engine, "me")
    assert [(a.kind, a.score, a.misconception, a.hints_used, a.seconds, a.at) for a in mine] == [
        ("scores", 1.0, None, 0, 12.5, t0), ("softmax", 0.5, "no_exp", 1, 40.0, t0 + timedelta(hours=1))]
    assert [a.score for a in storage.list_attempts(engine, "you")] == [None]
    assert storage.list_attempts(engine, "nobody") == []
    with pytest.raises(ValueError):
        storage.record_attempt(engine, "  ", "scores", 1, 6, 1.0, None, 0, 1.0)


# ---------------------------------------------------------------- stored exercises and versions


def test_exercises_and_versions_are_kept_with_items_submissions_and_attempts(engine):
    import exercises
    class_set = [exercises.generate("softmax", 100, 2), exercises.generate("softmax", 101, 2),
                 exercises.generate("scores", 102, 1)]
    created = storage.create_assignment(engine, "Kept", ITEMS, 1, exercises=class_set,
                                        kind_versions={"softmax": 4, "scores": 7})  # services pass the registry's
    code, key = created.assignment.code, created.teacher_key
    assert created.assignment.versions == (4, 7) == storage.get_assignment(engine, code).versions
    assert storage.create_assignment(engine, "Not kept", ITEMS, 1).assignment.versions == (None, None)
    assert storage.stored_exercises(engine, code) == {i: ex.to_dict() for i, ex in enumerate(class_set)}
    assert storage.stored_exercises(engine, code, "Ada") == {}
    ex = class_set[0]
    storage.record_submission(engine, code, "Ada", **_entry(0), version=ex.version, exercise=ex)
    storage.record_submission(engine, code, "Bo", **_entry(0))  # as rows from before versions were kept
    ada, bo = storage.list_submissions(engine, code, key)
    assert (ada.version, ada.exercise) == (ex.version, ex.to_dict()) and (bo.version, bo.exercise) == (None, None)
    storage.record_attempt(engine, "me", "softmax", 2, 100, 1.0, None, 0, 5.0, version=ex.version, exercise=ex)
    (attempt,) = storage.list_attempts(engine, "me")
    assert (attempt.version, exercises.Exercise.from_dict(attempt.exercise)) == (ex.version, ex)


def test_a_students_exercises_are_stored_once_first_one_wins(engine):
    import exercises
    created = storage.create_assignment(engine, "Variants", ITEMS, 1, per_student=True)
    code = created.assignment.code
    first = {0: exercises.generate("softmax", 1, 2)}
    assert storage.store_exercises(engine, code, "Ada", first) == {0: first[0].to_dict()}
    again = storage.store_exercises(engine, code, " ADA ", {0: exercises.generate("softmax", 2, 2),
                                                            1: exercises.generate("softmax", 3, 2)})
    assert again[0] == first[0].to_dict(), "a stored exercise is never replaced"
    assert set(again) == {0, 1} and storage.stored_exercises(engine, code, "Bo") == {}
    with pytest.raises(storage.UnknownAssignment):
        storage.store_exercises(engine, "ZZZZZZZZ", "Ada", first)


def test_eight_sessions_of_one_student_opening_at_once_see_the_same_exercises(engine):
    import exercises
    code = storage.create_assignment(engine, "Rush", ITEMS, 1, per_student=True).assignment.code
    results, errors = [], []

    def first_visit(seed: int) -> None:
        try:
            drawn = {i: exercises.generate("softmax", seed + i, 2) for i in range(3)}
            results.append(storage.store_exercises(engine, code, "Ada", drawn))
        except Exception as err:  # noqa: BLE001  (reported below)
            errors.append(err)

    threads = [threading.Thread(target=first_visit, args=(10 * k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 8
    assert all(r == results[0] for r in results) and set(results[0]) == {0, 1, 2}


def test_a_database_from_before_gets_the_new_columns_and_keeps_its_rows(db_url):
    engine = storage.open_engine(db_url)
    created = storage.create_assignment(engine, "Old", ITEMS, 1)
    storage.record_submission(engine, created.assignment.code, "Ada", **_entry(0))
    storage.record_attempt(engine, "me", "scores", 1, 6, 1.0, None, 0, 12.5)
    with engine.begin() as conn:  # the schema as it was: no exercise or version columns
        for table in ("submissions", "attempts"):
            for column in ("exercise", "version"):
                conn.exec_driver_sql(f'ALTER TABLE {table} DROP COLUMN "{column}"')
        conn.exec_driver_sql("DROP TABLE assignment_exercises")
    engine.dispose()
    engine = storage.open_engine(db_url)  # added back, nullable
    try:
        (sub,) = storage.list_submissions(engine, created.assignment.code, created.teacher_key)
        assert (sub.student, sub.version, sub.exercise) == ("Ada", None, None)
        (attempt,) = storage.list_attempts(engine, "me")
        assert (attempt.seconds, attempt.version, attempt.exercise) == (12.5, None, None)
        assert storage.stored_exercises(engine, created.assignment.code) == {}
        assert storage_db.add_missing_columns(engine) == [], "nothing left to add"
    finally:
        engine.dispose()


# ---------------------------------------------------------------- concurrency and crashes


WRITES_PER_THREAD = 100  # each thread's writes interleave with the seven others' many times over


def test_eight_threads_lose_no_submission(engine):
    created = storage.create_assignment(engine, "A", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    acknowledged: list[list[int]] = [[] for _ in range(8)]
    errors: list[BaseException] = []

    def write(t: int) -> None:
        try:
            for i in range(WRITES_PER_THREAD):
                acknowledged[t].append(storage.record_submission(engine, code, f"student {t}", **_entry(i % 3)))
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    ids = [i for ids in acknowledged for i in ids]
    assert len(ids) == 8 * WRITES_PER_THREAD and len(set(ids)) == 8 * WRITES_PER_THREAD
    stored = storage.list_submissions(engine, code, key)
    assert sorted(s.id for s in stored) == sorted(ids)
    assert {s.student for s in stored} == {f"student {t}" for t in range(8)}


def test_sqlite_writers_of_one_process_take_turns_and_a_failed_write_frees_the_turn(tmp_path):
    """Writers in one process queue on a lock for their file (woken the moment it is free, not after
    SQLite's sleeping retries); a write that fails or rolls back gives the turn to the next one."""
    engine = storage.open_engine(f"sqlite:///{tmp_path / 'turns.sqlite3'}")
    other = storage.open_engine(f"sqlite:///{tmp_path / 'other.sqlite3'}")
    created = storage.create_assignment(engine, "A", ITEMS, 1)
    code = created.assignment.code
    with pytest.raises(sa.exc.IntegrityError), storage_db.writing(engine).begin() as conn:
        conn.execute(sa.insert(storage_db.submissions).values(
            assignment_code="NOPENOPE", student="a", student_key="a", item_index=0, kind="softmax", level=1,
            seed=1, answer={}, score=None, misconception=None, submitted_at=datetime(2026, 1, 1)))
    with pytest.raises(RuntimeError), storage_db.writing(engine).begin():
        raise RuntimeError("the page's code failed mid-transaction")
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with storage_db.writing(engine).begin() as conn:
            conn.exec_driver_sql("CREATE TABLE held (x INTEGER)")
            holding.set()
            release.wait(30)
            order.append("first committed")

    def second() -> None:
        holding.wait(30)
        storage.record_submission(engine, code, "second", **_entry(0))
        order.append("second written")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for th in threads:
        th.start()
    holding.wait(30)
    storage.create_assignment(other, "B", ITEMS, 1)  # another file's writers are not held up
    order.append("other file written")
    release.set()
    for th in threads:
        th.join(60)
    assert not any(th.is_alive() for th in threads), "a writer never got its turn"
    assert order == ["other file written", "first committed", "second written"]
    assert [s.student for s in storage.list_submissions(engine, code, created.teacher_key)] == ["second"]
    engine.dispose()
    other.dispose()


CHILD = """
import sys
import storage
engine = storage.open_engine(sys.argv[1])
i = 0
while True:
    sid = storage.record_submission(engine, sys.argv[2], "writer", 0, "softmax", 2, 1, {"i": i}, 0.5, None)
    print(sid, flush=True)  # acknowledged: printed only after the commit returned
    i += 1
"""


def _kill_writer_mid_stream(url: str, code: str, wait_for: int) -> list[int]:
    """Start a writer, let it acknowledge `wait_for` submissions, SIGKILL it; every id it printed."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("DATABASE_URL", None)
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env)
    acked = []
    try:
        while len(acked) < wait_for:
            line = child.stdout.readline()
            if not line:
                pytest.fail(f"the writer stopped early: {child.stderr.read()[-2000:]}")
            acked.append(int(line))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        rest = child.stdout.read()  # lines it printed before the kill landed
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    acked += [int(line) for line in rest.split("\n")[:-1] if line.strip()]  # a cut-off last line is not an ack
    return acked


def test_writer_killed_mid_stream_loses_nothing_acknowledged(db_url):
    engine = storage.open_engine(db_url)
    created = storage.create_assignment(engine, "A", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    engine.dispose()
    acked: list[int] = []
    for wait_for in (40, 120):  # kill at different points, reopening the same database after a kill
        acked += _kill_writer_mid_stream(db_url, code, wait_for)
    engine = storage.open_engine(db_url)
    if db_url.startswith("sqlite"):
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    stored = {s.id for s in storage.list_submissions(engine, code, key)}
    assert set(acked) <= stored
    assert len(acked) >= 160
    storage.record_submission(engine, code, "after", **_entry(0))  # still writable
    engine.dispose()


# ---------------------------------------------------------------- configuration


def test_sqlite_connections_use_wal_and_foreign_keys(tmp_path):
    engine = storage.open_engine(f"sqlite:///{tmp_path / 'sub' / 'x.sqlite3'}")  # the folder is created
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
    with pytest.raises(sa.exc.IntegrityError), storage_db.writing(engine).begin() as conn:
        conn.execute(sa.insert(storage_db.submissions).values(
            assignment_code="NOPENOPE", student="a", student_key="a", item_index=0, kind="softmax", level=1,
            seed=1, answer={}, score=None, misconception=None, submitted_at=datetime(2026, 1, 1)))


def test_database_url_from_the_environment(tmp_path):
    assert storage.database_url({}) == f"sqlite:///{storage_db.DEFAULT_SQLITE_PATH}"
    assert storage.database_url({"ATTENTION_DB_PATH": str(tmp_path / "a.db")}) == f"sqlite:///{tmp_path / 'a.db'}"
    env = {"DATABASE_URL": "postgres://u:p@db.example:5432/app", "ATTENTION_DB_PATH": "/ignored"}
    assert storage.database_url(env) == "postgresql+psycopg://u:p@db.example:5432/app"
    assert storage.database_url({"DATABASE_URL": "postgresql://h/d"}) == "postgresql+psycopg://h/d"
    assert storage.database_url({"DATABASE_URL": "postgresql+psycopg://h/d"}) == "postgresql+psycopg://h/d"


def test_an_exam_time_limit_counts_from_the_first_opening(engine):
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    created = storage.create_assignment(engine, "Exam", ITEMS, 1, rules={"attempts": 0, "exam": True,
                                                                         "time_limit": 10})
    code = created.assignment.code
    assert storage.opened(engine, code, "p1", at=t0) == t0
    assert storage.opened(engine, code, "p1", at=t0 + timedelta(minutes=5)) == t0  # the first one stays
    storage.record_submissions(engine, code, "Ada", [_entry(0)], t0 + timedelta(minutes=9), person="p1")
    with pytest.raises(storage.Refused) as info:
        storage.record_submissions(engine, code, "Ada", [_entry(0)], t0 + timedelta(minutes=11), person="p1")
    assert info.value.reason == "time_up" and info.value.when == t0 + timedelta(minutes=10)


def test_a_paper_submission_keeps_its_cells_in_its_transaction(engine):
    """A submission read from paper is stored with source "paper" and its cells (crop bytes included) in
    the attempt's transaction: a refused attempt leaves no cell behind."""
    code = storage.create_assignment(engine, "Paper", ITEMS, seed=7).assignment.code
    cell = {"grid": 0, "row": 1, "col": 0, "item_index": 0, "part": "A", "text": "0.5", "confidence": 0.97,
            "reviewed": True, "right": True, "crop": b"\x89PNG\r\n\x1a\n" + bytes(range(256))}
    ids = storage.record_submissions(engine, code, "Ada", [_entry(0)], source="paper", cells=[cell])
    rows = storage.attempts_of(engine, code, "Ada")[0]
    assert [r.id for r in rows] == ids and rows[0].source == "paper", rows
    kept = storage.paper_cells_of(engine, code, rows[0].attempt_id)
    assert len(kept) == 1 and kept[0]["crop"] == cell["crop"] and kept[0]["text"] == "0.5" and kept[0]["reviewed"], kept
    with pytest.raises(ValueError):
        storage.record_submissions(engine, code, "Alan", [_entry(9)], source="paper", cells=[cell])
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(storage_db.paper_cells)).scalar() == 1, \
            "a refused attempt left its cells"
