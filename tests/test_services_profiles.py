"""services.profiles on SQLite and PostgreSQL: a private profile per browser, a recovery code
shown once, the signed-in user as the profile, export and delete, bad input (a forged or unknown id or
code opens a fresh empty profile, never another learner's data), and the migration that keeps the
attempts stored under the old, typed profile names."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

import storage
from services import db as services_db
from services import profiles, progress, review
from storage import db as storage_db
from storage import profiles as store
from tests.test_storage import db_url  # noqa: F401  (fixture: SQLite, and a PostgreSQL schema of its own)

T0 = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)


@pytest.fixture
def db(db_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DATABASE_URL", db_url)
    engine = services_db.engine()
    yield engine
    engine.dispose()


def _attempt(kind: str = "softmax", level: int = 1, score: float = 1.0, at: datetime = T0) -> dict:
    return {"kind": kind, "level": level, "seed": 7, "score": score, "misconception": None, "hints_used": 0,
            "seconds": 200.0, "at": at, "solution_shown": False}


def test_two_browsers_never_see_each_others_data_and_a_returning_one_keeps_its_own(db):
    ada, bo = profiles.open_browser(None), profiles.open_browser(None)
    assert ada.fresh and bo.fresh and ada.notice is None
    assert ada.profile != bo.profile and ada.secret != bo.secret
    assert profiles.well_formed_secret(ada.secret) and len(ada.secret) == 43, "256 random bits"
    progress.record_attempt(ada.profile, _attempt("scores", score=0.25))
    progress.record_attempt(ada.profile, _attempt("softmax"))
    assert progress.attempts(bo.profile) == []
    assert review.up_next(progress.attempts(bo.profile), ["projection", "scores"], T0).reason == "start"

    back = profiles.open_browser(ada.secret)  # the same browser, a new session: its cookie
    assert (back.profile, back.secret, back.fresh, back.notice) == (ada.profile, ada.secret, False, None)
    assert [a.kind for a in progress.attempts(back.profile)] == ["scores", "softmax"]


def test_only_hashes_of_the_secrets_are_stored(db):
    opened = profiles.open_browser(None)
    code = profiles.new_recovery_code(opened.profile)
    with db.connect() as conn:
        stored = [tuple(map(str, row)) for table in ("profiles", "profile_keys")
                  for row in conn.execute(sa.text(f"SELECT * FROM {table}")).all()]
    text = json.dumps(stored)
    assert opened.secret not in text and profiles.clean_code(code) not in text and code not in text


@pytest.mark.parametrize("forged", ["A" * 43, "x", "'; DROP TABLE attempts; --", "../../etc/passwd", "é" * 43,
                                    "A" * 5000, "   "])
def test_a_forged_or_unknown_id_opens_a_fresh_empty_profile_with_a_message(db, forged):
    other = profiles.open_browser(None)
    progress.record_attempt(other.profile, _attempt())
    opened = profiles.open_browser(forged)
    assert opened.fresh and opened.notice == "unknown_id"
    assert opened.profile != other.profile and progress.attempts(opened.profile) == []
    assert profiles.well_formed_secret(opened.secret) and opened.secret != forged


def test_the_id_of_a_deleted_profile_opens_a_fresh_one(db):
    gone = profiles.open_browser(None)
    progress.record_attempt(gone.profile, _attempt())
    assert profiles.delete(gone.profile) == 1
    assert progress.attempts(gone.profile) == []
    again = profiles.open_browser(gone.secret)
    assert again.fresh and again.notice == "unknown_id" and again.profile != gone.profile


def test_a_recovery_code_opens_the_same_profile_elsewhere_once_made(db):
    home = profiles.open_browser(None)
    progress.record_attempt(home.profile, _attempt("masking"))
    assert not profiles.has_recovery_code(home.profile)
    code = profiles.new_recovery_code(home.profile)
    assert len(profiles.clean_code(code)) == profiles.CODE_LENGTH and profiles.has_recovery_code(home.profile)

    typed = code.lower().replace("-", " ").replace("0", "o").replace("1", "l")  # as a person might type it
    school = profiles.open_with_code(typed)
    assert school is not None and school.profile == home.profile and school.secret != home.secret
    assert [a.kind for a in progress.attempts(school.profile)] == ["masking"]
    assert profiles.open_browser(school.secret).profile == home.profile, "the second browser keeps it"
    assert profiles.open_browser(home.secret).profile == home.profile, "and the first one too"

    newer = profiles.new_recovery_code(home.profile)
    assert profiles.open_with_code(code) is None, "a new code replaces the old one"
    assert profiles.open_with_code(newer).profile == home.profile


@pytest.mark.parametrize("bad", [None, "", "0000-0000-0000-0000-0000", "not a code", "U" * 20, "1" * 5000,
                                 "<script>alert(1)</script>"])
def test_a_forged_or_unknown_recovery_code_opens_nothing(db, bad):
    someone = profiles.open_browser(None)
    profiles.new_recovery_code(someone.profile)
    assert profiles.open_with_code(bad) is None


def test_the_signed_in_user_is_the_profile(db):
    one = profiles.open_login("https://accounts.example", "user-1")
    assert profiles.open_login("https://accounts.example", "user-1").profile == one.profile and one.secret is None
    assert profiles.open_login("https://accounts.example", "user-2").profile != one.profile
    assert profiles.open_login("https://other.example", "user-1").profile != one.profile
    assert profiles.open_browser(None).profile != one.profile
    with pytest.raises(ValueError):
        profiles.open_login("https://accounts.example", "  ")


def test_export_is_plain_json_of_everything_and_delete_removes_it(db):
    mine, theirs = profiles.open_browser(None), profiles.open_browser(None)
    progress.record_attempt(mine.profile, _attempt("scores", score=0.25))
    progress.record_attempt(mine.profile, _attempt("scores", score=1.0, at=T0 + timedelta(days=1)))
    progress.record_attempt(theirs.profile, _attempt("softmax"))
    exported = json.loads(json.dumps(profiles.export(mine.profile, now=T0 + timedelta(days=2))))
    assert [a["score"] for a in exported["attempts"]] == [0.25, 1.0]
    assert [(r["kind"], r["level"], r["reviews"]) for r in exported["reviews"]] == [("scores", 1, 2)]
    assert mine.secret not in json.dumps(exported) and mine.profile not in json.dumps(exported)
    assert profiles.delete(mine.profile) == 2
    assert profiles.export(mine.profile)["attempts"] == []
    assert len(progress.attempts(theirs.profile)) == 1, "another learner's data stays"


_OLD_ATTEMPTS = """CREATE TABLE attempts (id INTEGER PRIMARY KEY, profile VARCHAR(100) NOT NULL,
    kind VARCHAR(40) NOT NULL, level INTEGER NOT NULL, seed BIGINT NOT NULL, score FLOAT,
    misconception VARCHAR(100), hints_used INTEGER NOT NULL, seconds FLOAT NOT NULL, at TIMESTAMP NOT NULL,
    version INTEGER, exercise JSON)"""


def test_the_migration_keeps_the_old_named_profiles_data_behind_a_code(db_url, monkeypatch):  # noqa: F811
    old = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    with old.begin() as conn:  # a database as the version before private profiles left it
        conn.exec_driver_sql(_OLD_ATTEMPTS)
        for i, name in enumerate(["me", "me", "Ada"]):
            conn.execute(sa.text("INSERT INTO attempts (id, profile, kind, level, seed, score, hints_used, seconds, at)"
                                 " VALUES (:id, :p, 'softmax', 1, 1, 1.0, 0, 5.0, :at)"),
                         {"id": i + 1, "p": name, "at": datetime(2026, 1, 1, 9, i)})
    old.dispose()
    monkeypatch.setenv("DATABASE_URL", db_url)
    engine = services_db.engine()
    assert store.legacy_profiles(engine) == {"Ada": 1, "me": 2}
    assert [a.solution_shown for a in storage.list_attempts(engine, "me")] == [None, None], "kept, not invented"
    assert storage_db.register_legacy_profiles(engine) == [], "idempotent"
    assert storage.open_engine(db_url) is not None and store.legacy_profiles(engine) == {"Ada": 1, "me": 2}

    # no browser reaches a legacy profile by its name; the operator can hand out a code for it
    assert profiles.open_browser("me").profile != "me"
    assert profiles.open_with_code("me") is None
    printed = []
    monkeypatch.setattr("builtins.print", lambda *a, **k: printed.append(" ".join(map(str, a))))
    assert profiles.main(["claim", "me"]) == 0
    assert profiles.open_with_code(printed[-1]).profile == "me"
    assert profiles.main(["claim", "nobody"]) == 1


# ---------------------------------------------------------------- recovery signs out, planted cookies, deletion


def test_a_new_recovery_code_signs_out_every_other_browser(db):
    """A browser that opened a profile with a recovery code kept access after a new code replaced it."""
    home = profiles.open_browser(None)
    code = profiles.new_recovery_code(home.profile, keep=home.secret)
    borrowed = profiles.open_with_code(code)  # someone who saw the old code
    assert borrowed.profile == home.profile and profiles.still_open(home.profile, borrowed.secret)
    profiles.new_recovery_code(home.profile, keep=home.secret)
    assert not profiles.still_open(home.profile, borrowed.secret), "its open page loses the profile"
    again = profiles.open_browser(borrowed.secret, borrowed.browser)  # its cookie, next visit
    assert again.profile != home.profile and again.fresh and again.notice == "unknown_id"
    assert profiles.open_with_code(code) is None, "the old code opens nothing"
    assert profiles.still_open(home.profile, home.secret)
    assert profiles.open_browser(home.secret, home.browser).profile == home.profile  # this browser keeps it


def test_sign_out_other_browsers(db):
    home = profiles.open_browser(None)
    code = profiles.new_recovery_code(home.profile, keep=home.secret)
    others = [profiles.open_with_code(code) for _ in range(3)]
    assert profiles.sign_out_others(home.profile, home.secret) == 3
    assert not any(profiles.still_open(home.profile, o.secret) for o in others)
    assert profiles.still_open(home.profile, home.secret)
    assert profiles.open_with_code(code).profile == home.profile, "the code itself still works"


def test_a_planted_cookie_files_nothing_until_its_browser_confirms(db):
    """A cookie planted in a victim's browser filed the victim's attempts in the planter's profile."""
    planter = profiles.open_browser(None)
    victim_browser = profiles.open_browser(None).browser  # the victim's browser has its own id
    opened = profiles.open_browser(planter.secret, victim_browser)  # the planted cookie, in the victim's browser
    assert opened.profile == planter.profile and not opened.confirmed
    with pytest.raises(profiles.NotConfirmed):
        progress.record_attempt(opened.profile, _attempt(), secret=opened.secret, browser=victim_browser)
    assert progress.attempts(planter.profile) == []
    # the planter's own browser files as always
    progress.record_attempt(planter.profile, _attempt(), secret=planter.secret, browser=planter.browser)
    # a browser with no id cookie at all (it was planted alone) is not trusted either
    assert not profiles.open_browser(planter.secret, None).confirmed
    # the victim says it is theirs after all: filed from now on
    assert profiles.confirm(opened.secret, victim_browser)
    progress.record_attempt(opened.profile, _attempt(score=0.5), secret=opened.secret, browser=victim_browser)
    assert [a.score for a in progress.attempts(planter.profile)] == [1.0, 0.5]


def test_a_secret_from_before_browser_ids_belongs_to_the_first_browser_that_shows_it(db):
    secret = profiles.new_secret()
    profile = store.create_profile(db, "browser", secret, "browser")  # as stored before browsers were kept: no browser
    first = profiles.open_browser(secret, None)
    assert first.profile == profile and first.confirmed and first.browser
    assert profiles.open_browser(secret, first.browser).confirmed
    assert not profiles.open_browser(secret, profiles.new_secret()).confirmed


# ---------------------------------------------------------------- the cookie the server sets


def test_the_server_cookie_keeps_a_sent_secret_and_makes_a_profile_for_a_new_browser(db):
    browser = profiles.new_secret()
    secret = profiles.cookie_for(None, browser)  # a browser's first page
    opened = profiles.open_browser(secret, browser)
    assert not opened.fresh and opened.confirmed, "the cookie the server set opens a profile of this browser"
    assert profiles.cookie_for(secret, browser) == secret, "a returning browser keeps its secret"
    assert profiles.cookie_for("short", browser) not in ("short", secret), "a malformed cookie is replaced"


def test_a_handed_profile_reaches_the_browser_at_its_next_page_load_once(db):
    home = profiles.open_browser(None)
    code = profiles.new_recovery_code(home.profile, keep=home.secret)
    elsewhere = profiles.open_browser(None)  # another browser, with a profile of its own
    opened = profiles.open_with_code(code, elsewhere.browser)  # its page opens the code's profile
    profiles.hand_off(opened.profile, elsewhere.browser)
    taken = profiles.cookie_for(elsewhere.secret, elsewhere.browser)  # its next page load
    assert taken != elsewhere.secret
    again = profiles.open_browser(taken, elsewhere.browser)
    assert again.profile == home.profile and again.confirmed
    assert profiles.cookie_for(taken, elsewhere.browser) == taken, "taken once"
    assert profiles.cookie_for(elsewhere.secret, profiles.new_secret()) == elsewhere.secret, "for that browser only"


def test_a_new_recovery_code_also_cancels_a_profile_waiting_for_another_browser(db):
    home = profiles.open_browser(None)
    code = profiles.new_recovery_code(home.profile, keep=home.secret)
    borrower = profiles.open_browser(None)
    opened = profiles.open_with_code(code, borrower.browser)
    profiles.hand_off(opened.profile, borrower.browser)  # waiting for the borrower's next page load
    mine = profiles.open_with_code(code, home.browser)  # and one waiting for the keeping browser itself
    profiles.hand_off(mine.profile, home.browser)
    profiles.new_recovery_code(home.profile, keep=mine.secret)
    later = profiles.cookie_for(borrower.secret, borrower.browser)
    assert later == borrower.secret and profiles.open_browser(later, borrower.browser).profile == borrower.profile, \
        "the borrower's next page load brings back no access"
    kept = profiles.cookie_for(home.secret, home.browser)
    assert kept != home.secret and profiles.open_browser(kept, home.browser).profile == home.profile


def test_a_deleted_profile_leaves_no_copy_in_the_sqlite_files(tmp_path):
    """The SQLite -wal file kept 45 copies of a deleted profile's id until a checkpoint."""
    engine = storage.open_engine(f"sqlite:///{tmp_path / 'wal.sqlite3'}")
    try:
        keep = store.create_profile(engine, "browser", profiles.new_secret(), "browser")
        gone = store.create_profile(engine, "browser", profiles.new_secret(), "browser")
        for i in range(45):
            storage.record_attempt(engine, gone, "softmax", 1, i, 1.0, None, 0, 10.0)
            storage.record_attempt(engine, keep, "softmax", 1, i, 1.0, None, 0, 10.0)
        store.delete_profile(engine, gone)
        files = [p for p in tmp_path.iterdir() if p.name.startswith("wal.sqlite3")]
        for path in files:
            assert gone.encode() not in path.read_bytes(), f"{path.name} keeps the deleted profile's id"
        assert len(storage.list_attempts(engine, keep)) == 45  # nothing else lost
    finally:
        engine.dispose()
