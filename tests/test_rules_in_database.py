"""Rules live in the database (DESIGN §9): attempt limits and exam clocks hold when many
sessions, tabs or replicas act at once, on SQLite and on PostgreSQL (the db_url fixture: under CI the
PostgreSQL half must run, and fails when no server can be started).
"""

from __future__ import annotations

import contextlib
import threading
from datetime import UTC, datetime, timedelta

import pytest

import storage
from exercises.i18n import t
from tests.test_storage import ITEMS, _entry, db_url, engine  # noqa: F401  (fixtures: SQLite and PostgreSQL)

SESSIONS = 12  # submits pressed at the same moment (the engine's pool holds 15 connections)
TRIALS = 4


def _at_once(count: int, act) -> tuple[list, list[BaseException]]:
    """Run act(i) for i in range(count) in threads released together; (results, errors)."""
    barrier = threading.Barrier(count)
    results: list = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        barrier.wait()
        try:
            out = act(i)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            with lock:
                errors.append(err)
        else:
            with lock:
                results.append(out)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results, errors


@pytest.mark.parametrize("allowed", [1, 3])
def test_many_submits_at_once_store_exactly_the_allowed_attempts(engine, allowed):  # noqa: F811
    """8 submits at once stored up to 7 of 1 allowed on PostgreSQL (count, then insert, no lock)."""
    created = storage.create_assignment(engine, "Limit", ITEMS, 1, rules={"attempts": allowed})
    code, key = created.assignment.code, created.teacher_key
    for trial in range(TRIALS):
        student = f"Student {trial}"

        def submit(i: int, student=student) -> list[int]:
            return storage.record_submissions(engine, code, student, [_entry(0, 0.5), _entry(1, 1.0)],
                                              person=f"tab-{student}-{i}")

        stored, refused = _at_once(SESSIONS, submit)
        assert len(stored) == allowed, f"trial {trial}: {len(stored)} of {allowed} allowed were stored"
        assert len(refused) == SESSIONS - allowed
        assert all(isinstance(err, storage.Refused) and err.reason == "no_attempts" for err in refused), refused
        rows = [s for s in storage.list_submissions(engine, code, key) if s.student == student]
        assert len({s.attempt_id for s in rows}) == allowed and len(rows) == 2 * allowed
        assert sorted({s.attempt for s in rows}) == list(range(1, allowed + 1))
        assert sorted(i for ids in stored for i in ids) == sorted(s.id for s in rows)  # every acknowledged one
    # every refused one is told why, in each language
    assert "attempts" in t("assign.refused.no_attempts", "en")
    assert t("assign.refused.no_attempts", "zh") != t("assign.refused.no_attempts", "en")


def test_unlimited_attempts_at_once_are_all_kept_with_distinct_numbers(engine):  # noqa: F811
    created = storage.create_assignment(engine, "Open", ITEMS, 1, rules={"attempts": 0})
    code, key = created.assignment.code, created.teacher_key
    stored, errors = _at_once(SESSIONS, lambda i: storage.record_submissions(
        engine, code, "Ada", [_entry(0)], person=f"tab-{i}"))
    assert errors == [] and len(stored) == SESSIONS
    numbers = sorted(s.attempt for s in storage.list_submissions(engine, code, key))
    assert numbers == list(range(1, SESSIONS + 1))


def test_deleting_an_assignment_deletes_its_attempt_claims(engine):  # noqa: F811
    created = storage.create_assignment(engine, "Gone", ITEMS, 1, rules={"attempts": 1})
    code, key = created.assignment.code, created.teacher_key
    storage.record_submissions(engine, code, "Ada", [_entry(0)])
    storage.delete_assignment(engine, code, key)
    with engine.connect() as conn:
        left = conn.execute(storage.db.attempt_claims.select()).all()
    assert left == []



# ---------------------------------------------------------------- the exam clock

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def test_the_exam_clock_is_one_per_student_on_the_server_and_survives_new_browsers(engine):  # noqa: F811
    """Reloading an open assignment started a fresh clock: 5 minutes past a 1-minute limit was accepted."""
    created = storage.create_assignment(engine, "Exam", ITEMS, 1, rules={"attempts": 0, "exam": True,
                                                                         "time_limit": 1})
    code = created.assignment.code
    assert storage.exam_clock(engine, code, "Ada", at=T0) == T0
    # a reload, a new browser, another letter case: the same clock
    assert storage.exam_clock(engine, code, "ADA ", at=T0 + timedelta(minutes=5)) == T0
    storage.record_submissions(engine, code, "Ada", [_entry(0)], T0 + timedelta(seconds=50), person="browser-1")
    with pytest.raises(storage.Refused) as info:
        storage.record_submissions(engine, code, "ada", [_entry(0)], T0 + timedelta(minutes=5), person="browser-2")
    assert info.value.reason == "time_up" and info.value.when == T0 + timedelta(minutes=1)


def test_a_submission_without_an_opening_starts_the_clock_and_cannot_restart_it(engine):  # noqa: F811
    created = storage.create_assignment(engine, "Exam", ITEMS, 1, rules={"attempts": 0, "exam": True,
                                                                         "time_limit": 1})
    code = created.assignment.code
    storage.record_submissions(engine, code, "Bob", [_entry(0)], T0, person="tab-1")  # no clock yet: starts now
    assert storage.exam_clock(engine, code, "Bob", at=T0 + timedelta(minutes=3)) == T0
    with pytest.raises(storage.Refused) as info:
        storage.record_submissions(engine, code, "Bob", [_entry(0)], T0 + timedelta(minutes=3), person="tab-2")
    assert info.value.reason == "time_up"


def test_many_sessions_starting_one_clock_at_once_agree_on_the_first(engine):  # noqa: F811
    created = storage.create_assignment(engine, "Exam", ITEMS, 1, rules={"exam": True, "time_limit": 10})
    code = created.assignment.code
    starts, errors = _at_once(SESSIONS, lambda i: storage.exam_clock(engine, code, "Cy", at=T0 + timedelta(seconds=i)))
    assert errors == [] and len(set(starts)) == 1 and starts[0] in {T0 + timedelta(seconds=i) for i in range(SESSIONS)}


# ---------------------------------------------------------------- names held by browser profiles


def test_a_typed_name_belongs_to_the_first_browser_and_a_clash_goes_to_the_teacher(engine):  # noqa: F811
    """Another browser typing a classmate's name first (any letter case) used up the classmate's one
    attempt: the classmate then read "You have used all your attempts (1)"."""
    created = storage.create_assignment(engine, "Open", ITEMS, 1, rules={"attempts": 1})
    code, key = created.assignment.code, created.teacher_key
    assert storage.claim_name(engine, code, "ada lovelace", "profile-squatter")
    storage.record_submissions(engine, code, "ada lovelace", [_entry(0, 0.0)], claimant="profile-squatter")
    assert not storage.claim_name(engine, code, "Ada  Lovelace", "profile-ada")  # taken
    with pytest.raises(storage.Refused) as info:  # the server refuses it too, whatever the page does
        storage.record_submissions(engine, code, "Ada Lovelace", [_entry(0, 1.0)], claimant="profile-ada")
    assert info.value.reason == "name_taken"
    assert "taken" in t("assign.refused.name_taken", "en")
    (clash,) = storage.clashes_of(engine, code, key)
    assert (clash.name, clash.holder, clash.admitted) == ("Ada Lovelace", "ada lovelace", False)
    assert "profile-ada" not in repr(clash)  # the profile id stays private
    with pytest.raises(storage.AccessDenied):
        storage.clashes_of(engine, code, storage.create_assignment(engine, "B", ITEMS, 1).teacher_key)
    # the teacher releases the name: the squatter's attempt is kept and shown, no longer counted as Ada's
    assert storage.release_name(engine, code, key, clash.student_key) == 1
    assert storage.claim_name(engine, code, "Ada Lovelace", "profile-ada")
    storage.record_submissions(engine, code, "Ada Lovelace", [_entry(0, 1.0)], claimant="profile-ada")
    assert not storage.claim_name(engine, code, "ADA LOVELACE", "profile-squatter")
    rows = storage.list_submissions(engine, code, key)
    assert sorted(r.score for r in rows) == [0.0, 1.0] and storage.clashes_of(engine, code, key)[0].ref != clash.ref


def test_the_teacher_admits_a_second_browser_of_the_same_person(engine):  # noqa: F811
    created = storage.create_assignment(engine, "Open", ITEMS, 1, rules={"attempts": 2})
    code, key = created.assignment.code, created.teacher_key
    assert storage.claim_name(engine, code, "Bo", "laptop")
    storage.record_submissions(engine, code, "Bo", [_entry(0)], claimant="laptop")
    assert not storage.claim_name(engine, code, "bo", "phone")
    (clash,) = storage.clashes_of(engine, code, key)
    assert storage.admit_clash(engine, code, key, clash.student_key, clash.ref)
    assert storage.claim_name(engine, code, "bo", "phone")
    storage.record_submissions(engine, code, "bo", [_entry(0)], claimant="phone")
    with pytest.raises(storage.Refused) as info:  # one person: the two browsers share the 2 attempts
        storage.record_submissions(engine, code, "Bo", [_entry(0)], claimant="laptop")
    assert info.value.reason == "no_attempts"
    assert storage.clashes_of(engine, code, key)[0].admitted


def test_many_browsers_typing_one_name_at_once_leave_one_holder(engine):  # noqa: F811
    created = storage.create_assignment(engine, "Open", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    held, errors = _at_once(SESSIONS, lambda i: storage.claim_name(engine, code, "Cy", f"browser-{i}"))
    assert errors == [] and sorted(held) == [False] * (SESSIONS - 1) + [True]
    assert len(storage.clashes_of(engine, code, key)) == SESSIONS - 1


def test_a_class_list_needs_no_claim(engine):  # noqa: F811
    created = storage.create_assignment(engine, "Listed", ITEMS, 1)
    code, key = created.assignment.code, created.teacher_key
    storage.set_roster(engine, code, key, ["Ada"])
    assert storage.claim_name(engine, code, "Ada", "one") and storage.claim_name(engine, code, "Ada", "two")
    storage.record_submissions(engine, code, "Ada", [_entry(0)], claimant="two")


# ---------------------------------------------------------------- an open exam's items, by their matrices


def _prints(exercise: dict) -> set[str]:
    return storage.fingerprints.of_given(exercise["given"])


def test_an_open_exams_items_are_found_by_their_given_matrices_not_by_seed(engine):  # noqa: F811
    import exercises

    item = exercises.generate("attention", 12, 1)
    created = storage.create_assignment(engine, "Exam", [{"kind": "attention", "level": 1}], 1, exercises=[item],
                                        rules={"exam": True})
    code, key = created.assignment.code, created.teacher_key
    given = {name: m.tolist() for name, m in item.matrices().items()}  # as typed elsewhere: Q, K, V
    prints = {storage.fingerprints.matrix_fingerprint(m, name) for name, m in given.items()}
    assert storage.open_exams_giving(engine, prints) == [code]
    assert storage.open_exams_giving(engine, set(sorted(prints)[:1])) == []  # one matrix alone is not the item
    assert storage.open_exams_giving(engine, set(sorted(prints)[:2])) == [code]  # two are (Q and K: the scores)
    other = exercises.generate("attention", 13, 1)
    assert storage.open_exams_giving(engine, _prints(other.to_dict())) == []
    # a student's own variant, stored when they open it, is found the same way
    own = exercises.generate("attention", 99, 1)
    per = storage.create_assignment(engine, "Own", [{"kind": "attention", "level": 1}], 1, per_student=True,
                                    rules={"exam": True})
    storage.store_exercises(engine, per.assignment.code, "Ada", {0: own})
    assert storage.open_exams_giving(engine, _prints(own.to_dict())) == [per.assignment.code]
    # over (closed, or past its deadline): computed again
    storage.update_assignment(engine, code, key, rules={"exam": True, "closed": True})
    assert storage.open_exams_giving(engine, prints) == []
    storage.update_assignment(engine, code, key, rules={"exam": True, "deadline": (T0 - timedelta(days=1))})
    assert storage.open_exams_giving(engine, prints, at=T0) == []
    storage.update_assignment(engine, code, key, rules={"exam": False})
    assert storage.open_exams_giving(engine, prints) == []


def test_a_database_from_before_fingerprints_gets_them(db_url):  # noqa: F811
    import exercises

    item = exercises.generate("scores", 5, 1)
    eng = storage.open_engine(db_url)
    created = storage.create_assignment(eng, "Old", [{"kind": "scores", "level": 1}], 1, exercises=[item],
                                        rules={"exam": True})
    with eng.begin() as conn:  # as an older version left it: exercises stored, no fingerprints
        conn.exec_driver_sql("DROP TABLE given_fingerprints")
    eng.dispose()
    eng = storage.open_engine(db_url)
    try:
        assert storage.open_exams_giving(eng, _prints(item.to_dict())) == [created.assignment.code]
        assert storage.fingerprints.backfill(eng) == 0, "nothing left to fingerprint"
    finally:
        eng.dispose()


def test_fingerprints_read_the_same_from_json_arrays_and_typed_text():
    import numpy as np

    from exercises.core.checkwork import read_matrix

    typed = read_matrix("Q", "0.5 -1\n2 .25")
    assert storage.fingerprints.matrix_fingerprint(typed.tolist()) == storage.fingerprints.matrix_fingerprint(
        [[0.5, -1], [2.0, 0.25]]) == storage.fingerprints.matrix_fingerprint(np.array([[0.5, -1.0], [2, 0.25]]).tolist())
    assert storage.fingerprints.matrix_fingerprint([[1, "-inf"]]) != storage.fingerprints.matrix_fingerprint([[1, 0]])
    assert storage.fingerprints.matrix_fingerprint([[1, 2]]) != storage.fingerprints.matrix_fingerprint([[1], [2]])
    assert storage.fingerprints.matrix_fingerprint([[1, 2]], "W_Q1") == storage.fingerprints.matrix_fingerprint(
        [[1, 2]], "W_Q") != storage.fingerprints.matrix_fingerprint([[1, 2]], "K")  # a head's W_Q is a W_Q
    assert storage.fingerprints.matrix_fingerprint([[1, 2], [3]]) is None
    # nothing to recognise: an identity, every cell the same (the page's example uses such weights)
    assert storage.fingerprints.matrix_fingerprint([[1, 0], [0, 1]]) is None
    assert storage.fingerprints.matrix_fingerprint([[0.5, 0.5]]) is None


def test_one_head_of_a_multi_head_exam_item_is_recognised(engine):  # noqa: F811
    """Check my work takes X and one head's weights: an item giving more matrices (other heads, W_O)
    is recognised by the ones it shares."""
    import exercises

    item = exercises.generate("multi_head", 4, 2)
    created = storage.create_assignment(engine, "Exam", [{"kind": "multi_head", "level": 2}], 1, exercises=[item],
                                        rules={"exam": True})
    head = {name: item.given[name].tolist() for name in ("X", "W_Q1", "W_K1", "W_V1")}
    prints = {storage.fingerprints.matrix_fingerprint(m, name) for name, m in head.items()} - {None}
    assert len(prints) >= 2 and storage.open_exams_giving(engine, prints) == [created.assignment.code]


# ---------------------------------------------------------------- throttles shared by sessions and replicas


def test_wrong_tries_at_once_are_all_counted_per_source_and_for_everyone(engine):  # noqa: F811
    from storage import throttles

    now = datetime(2026, 1, 5, 9, 0)

    def delay(failures: int) -> float:
        return 0.0 if failures <= 3 else 2.0 ** (failures - 4)

    waits, errors = _at_once(SESSIONS, lambda i: throttles.failed(engine, "gradebook", "one-address", f"try-{i}",
                                                                  now, delay, budget=1000, window_s=60))
    assert errors == [] and len(waits) == SESSIONS
    assert throttles.wait(engine, "gradebook", "one-address", now) == 2.0 ** (SESSIONS - 4)  # none lost
    assert throttles.wait(engine, "gradebook", "another", now) == 0.0
    _, errors = _at_once(SESSIONS, lambda i: throttles.failed(engine, "recovery", f"address-{i}", None, now, delay,
                                                              budget=SESSIONS, window_s=60))
    assert errors == [] and throttles.wait(engine, "recovery", "a-new-address", now) == 60.0  # budget spent
    throttles.succeeded(engine, "gradebook", "one-address")
    assert throttles.wait(engine, "gradebook", "one-address", now) == 0.0


# ---------------------------------------------------------------- replicas: separate processes on one database

REPLICAS = 3  # processes released at one moment: more than one, so a lock held inside one process lets two through
_SUBMITTER = r"""
import sys
import storage
url, code, tab = sys.argv[1], sys.argv[2], sys.argv[3]
engine = storage.open_engine(url)
entry = {"item_index": 0, "kind": "softmax", "level": 2, "seed": 100, "answer": None, "score": 1.0}
print("ready", flush=True)
sys.stdin.readline()  # released by the test once every process is ready
try:
    storage.record_submissions(engine, code, "Ada", [entry], person=tab)
    print("stored")
except storage.Refused as err:
    print("refused", err.reason)
"""


def test_submits_from_separate_processes_store_exactly_the_allowed_one(db_url):  # noqa: F811
    """Replicas are processes: the limit holds between them too (no lock of one process can)."""
    import subprocess
    import sys

    from tests.test_storage import REPO_ROOT

    eng = storage.open_engine(db_url)
    try:
        created = storage.create_assignment(eng, "Replicas", ITEMS, 1, rules={"attempts": 1})
        code, key = created.assignment.code, created.teacher_key
        procs = [subprocess.Popen([sys.executable, "-c", _SUBMITTER, db_url, code, f"replica-{i}"], cwd=REPO_ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(REPLICAS)]
        ready = [p.stdout.readline().strip() for p in procs]  # every process imported and connected
        for p in procs:  # then all released at once
            with contextlib.suppress(BrokenPipeError):  # one that died is reported below
                p.stdin.write("go\n")
                p.stdin.flush()
        outs = [p.communicate(timeout=120) for p in procs]
        assert ready == ["ready"] * REPLICAS, (ready, [err for _, err in outs])
        lines = [out.strip() for out, _ in outs]
        assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
        assert sorted(lines) == ["refused no_attempts"] * (REPLICAS - 1) + ["stored"], lines
        assert len(storage.list_submissions(eng, code, key)) == 1
    finally:
        eng.dispose()


def test_a_class_list_students_clock_from_before_still_counts(engine):  # noqa: F811
    created = storage.create_assignment(engine, "Exam", ITEMS, 1, rules={"attempts": 0, "exam": True,
                                                                         "time_limit": 10})
    code, key = created.assignment.code, created.teacher_key
    storage.set_roster(engine, code, key, ["Ada"])
    storage.opened(engine, code, "ada", at=T0)  # how the clock of a class-list student was kept before
    assert storage.exam_clock(engine, code, "Ada", at=T0 + timedelta(minutes=5)) == T0
    with pytest.raises(storage.Refused) as info:
        storage.record_submissions(engine, code, "Ada", [_entry(0)], T0 + timedelta(minutes=11), person="ada")
    assert info.value.reason == "time_up"
