"""Assignments, submissions and practice attempts in one SQL database (DESIGN §9).

    engine = storage.open_engine()            # SQLite file, or PostgreSQL when DATABASE_URL is set
    created = storage.create_assignment(engine, "Week 3", [{"kind": "softmax", "level": 2, "count": 3}], seed=7)
    created.assignment.code, created.teacher_key   # the key is shown once, stored only as a hash
    storage.record_submission(engine, code, "Ada", 0, "softmax", 2, seed, answer, score, misconception)
    storage.gradebook(engine, code, key)       # AccessDenied without the right key
    storage.record_attempt(engine, profile, kind, level, seed, score, misconception, hints_used, seconds, at)
    storage.list_attempts(engine, profile)
    storage.store_exercises(engine, code, student, {0: ex})   # the very exercises shown, kept once
    storage.stored_exercises(engine, code, student)            # {item index: Exercise.to_dict()}
"""

from .api import (
    AccessDenied,
    Assignment,
    Attempt,
    Clash,
    Created,
    Gradebook,
    Locked,
    Refused,
    Submission,
    UnknownAssignment,
    admit_clash,
    assignment_started,
    assignments_of,
    attempts_of,
    claim_name,
    clashes_of,
    counted,
    create_assignment,
    delete_assignment,
    exam_clock,
    get_assignment,
    gradebook,
    labels,
    list_attempts,
    list_submissions,
    merge_people,
    open_exams_giving,
    opened,
    owner_id,
    paper_cells_of,
    people,
    record_attempt,
    record_submission,
    record_submissions,
    release_name,
    rename_person,
    roster_names,
    server_secret,
    set_roster,
    store_exercises,
    stored_exercises,
    student_for_token,
    submission_count,
    update_assignment,
    verify_teacher_key,
)
from .db import database_url, normalise_url
from .engine import open_engine
from .keys import MalformedCode, MalformedKey, parse_code, parse_key

__all__ = [
    "AccessDenied", "Assignment", "Attempt", "Created", "Gradebook", "MalformedCode", "MalformedKey",
    "Submission", "UnknownAssignment", "create_assignment", "database_url", "get_assignment", "gradebook",
    "list_attempts", "list_submissions", "open_engine", "parse_code", "parse_key", "record_attempt",
    "record_submission", "paper_cells_of", "record_submissions", "store_exercises", "stored_exercises",
    "verify_teacher_key",
    "normalise_url", "Locked", "Refused", "assignments_of", "attempts_of", "counted", "delete_assignment", "labels",
    "exam_clock", "opened", "owner_id", "people", "roster_names", "server_secret", "set_roster", "student_for_token",
    "submission_count", "update_assignment", "merge_people", "rename_person",
    "Clash", "admit_clash", "assignment_started", "open_exams_giving", "claim_name", "clashes_of", "release_name",
]
