"""The engine and the schema: one SQL layer (SQLAlchemy Core) for SQLite and PostgreSQL.

SQLite (the default, a file): WAL journal, synchronous=FULL (a commit survives a crash), a busy
timeout, foreign keys on, BEGIN IMMEDIATE for writes so two writers queue instead of failing.
PostgreSQL when DATABASE_URL is set (psycopg 3). Either way each operation checks a connection out
of the engine's small pool for one short transaction and gives it back.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SQLITE_PATH = ROOT / "data" / "attention.sqlite3"
BUSY_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 5  # PostgreSQL: an unreachable server is a clear message after this, not a hang

metadata = sa.MetaData()
_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")  # SQLite autoincrements INTEGER PRIMARY KEY only

assignments = sa.Table(
    "assignments", metadata,
    sa.Column("code", sa.String(16), primary_key=True),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("items", sa.JSON, nullable=False),  # [{"kind", "level", "count"}]
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("per_student", sa.Boolean, nullable=False),
    sa.Column("allow_solutions", sa.Boolean, nullable=False),
    sa.Column("key_hash", sa.String(200), nullable=False),  # scrypt$n$r$p$salt$hash, never the key
    sa.Column("created_at", sa.DateTime, nullable=False),  # naive UTC
    # added later (nullable, so older databases get them): attempt rules (exercises.teacher.assignments.Rules
    # as a dict; None: the legacy ones), the owner (an HMAC of the teacher key with the server secret: one
    # key lists its assignments) and the builder's request id (pressing Create twice makes one)
    sa.Column("rules", sa.JSON, nullable=True),
    sa.Column("owner", sa.String(64), nullable=True, index=True),
    sa.Column("request_id", sa.String(64), nullable=True),
)

submissions = sa.Table(
    "submissions", metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              nullable=False),
    sa.Column("student", sa.String(100), nullable=False),  # as typed (cleaned)
    sa.Column("student_key", sa.String(100), nullable=False),  # case-folded: who it is
    sa.Column("item_index", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("level", sa.Integer, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("answer", sa.JSON, nullable=False),
    sa.Column("score", sa.Float, nullable=True),  # None: not graded (unreadable answer)
    sa.Column("misconception", sa.String(100), nullable=True),
    sa.Column("submitted_at", sa.DateTime, nullable=False),
    # the exercise graded (Exercise.to_dict()) and its generator version; None in rows stored before them
    sa.Column("version", sa.Integer, nullable=True),
    sa.Column("exercise", sa.JSON, nullable=True),
    # one submission (attempt) groups the rows of one press of Submit; `person` is who pressed it: the
    # class-list entry, or (an open assignment) the browser session, so no one replaces another's rows
    sa.Column("attempt_id", sa.String(40), nullable=True),
    sa.Column("attempt", sa.Integer, nullable=True),
    sa.Column("person", sa.String(120), nullable=True),
    sa.Column("source", sa.String(16), nullable=True),  # "paper": read from a photographed sheet; None: typed
    sa.Index("ix_submissions_code_student", "assignment_code", "student_key"),
)

# The cells of a submission read from paper (services.paper): what was read, how sure, whether the
# teacher reviewed it, and the straightened crop the student's page view and the review screen show.
paper_cells = sa.Table(
    "paper_cells", metadata,
    sa.Column("attempt_id", sa.String(40), primary_key=True),
    sa.Column("grid", sa.Integer, primary_key=True),
    sa.Column("row", sa.Integer, primary_key=True),
    sa.Column("col", sa.Integer, primary_key=True),
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("item_index", sa.Integer, nullable=False),
    sa.Column("part", sa.String(40), nullable=False),
    sa.Column("text", sa.String(40), nullable=False),
    sa.Column("confidence", sa.Float, nullable=False),
    sa.Column("reviewed", sa.Boolean, nullable=False),
    sa.Column("right", sa.Boolean, nullable=True),
    sa.Column("crop", sa.LargeBinary, nullable=False),  # PNG, a few kB
)

# Server-wide settings: the secret that keys assignment variants (when ATTENTION_SECRET is not set).
settings = sa.Table(
    "settings", metadata,
    sa.Column("name", sa.String(40), primary_key=True),
    sa.Column("value", sa.String(200), nullable=False),
)

# A class list: one row per student, with the SHA-256 of their personal link's random token.
roster = sa.Table(
    "roster", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("student_key", sa.String(100), primary_key=True),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("issued_at", sa.DateTime, nullable=False),
)

# Wrong tries at a form that accepts a secret, shared by every session and replica: one row
# per form and client address (a digest), and one per form with source "*" (the form's global budget).
throttles = sa.Table(
    "throttles", metadata,
    sa.Column("form", sa.String(40), primary_key=True),
    sa.Column("source", sa.String(64), primary_key=True),
    sa.Column("failures", sa.Integer, nullable=False),  # wrong tries in a row (the global row: in its window)
    sa.Column("until", sa.DateTime, nullable=False),  # naive UTC: no try is taken before it
    sa.Column("since", sa.DateTime, nullable=False),  # the first of those tries (the global row: its window)
    sa.Column("last", sa.String(64), nullable=True),  # a digest of the last try (a rerun is no new guess)
)

# When each person first opened an assignment (an exam's time limit counts from there).
openings = sa.Table(
    "openings", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("person", sa.String(120), primary_key=True),
    sa.Column("opened_at", sa.DateTime, nullable=False),
)

# One row per attempt number a student has used: two sessions submitting at once both count
# the same earlier attempts and ask for the same number; the primary key lets one of them through and
# the other counts again (and is refused when none is left). Attempts stored before it have no row.
attempt_claims = sa.Table(
    "attempt_claims", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("student_key", sa.String(100), primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("attempt_id", sa.String(40), nullable=False),
    sa.Column("claimed_at", sa.DateTime, nullable=False),
)

# Who holds a typed name on an assignment without a class list: the first browser profile to
# type it. Another profile typing the same name (any letter case) is refused and listed in name_clashes
# for the teacher, who admits it (the same person on another browser) or releases the name.
name_claims = sa.Table(
    "name_claims", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("student_key", sa.String(100), primary_key=True),
    sa.Column("profile", sa.String(100), nullable=False),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("claimed_at", sa.DateTime, nullable=False),
)

name_clashes = sa.Table(
    "name_clashes", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("student_key", sa.String(100), primary_key=True),
    sa.Column("profile", sa.String(100), primary_key=True),
    sa.Column("name", sa.String(100), nullable=False),  # as the second browser typed it
    sa.Column("at", sa.DateTime, nullable=False),
    sa.Column("admitted", sa.Boolean, nullable=False),  # the teacher said: the same person
)

# The very exercises of an assignment, stored once: the class's set when the assignment is created
# (student_key ""), a student's own variants when they first open it. Later views and regrades read
# these, so a generator change after that never changes what a student saw or how it is graded.
assignment_exercises = sa.Table(
    "assignment_exercises", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("student_key", sa.String(100), primary_key=True),  # "" for the class's set
    sa.Column("item_index", sa.Integer, primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("exercise", sa.JSON, nullable=False),  # Exercise.to_dict()
    sa.Column("stored_at", sa.DateTime, nullable=False),
)

# A fingerprint of each given matrix of every stored exercise: Check my work and Practice look
# up the matrices they are given and refuse an open exam's item. `matrices` is how many distinct
# matrices the item gives (storage.fingerprints says how many must be shared to match); an item with
# none has one row with fingerprint "-" (it is fingerprinted, and matches nothing).
given_fingerprints = sa.Table(
    "given_fingerprints", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("student_key", sa.String(100), primary_key=True),  # "" for the class's set
    sa.Column("item_index", sa.Integer, primary_key=True),
    sa.Column("fingerprint", sa.String(32), primary_key=True),
    sa.Column("matrices", sa.Integer, nullable=False),
    sa.Index("ix_given_fingerprints_fingerprint", "fingerprint"),
)

attempts = sa.Table(
    "attempts", metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("profile", sa.String(100), nullable=False),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("level", sa.Integer, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("score", sa.Float, nullable=True),
    sa.Column("misconception", sa.String(100), nullable=True),
    sa.Column("hints_used", sa.Integer, nullable=False),
    sa.Column("seconds", sa.Float, nullable=False),
    sa.Column("at", sa.DateTime, nullable=False),  # naive UTC
    sa.Column("version", sa.Integer, nullable=True),  # None in rows stored before versions were kept
    sa.Column("exercise", sa.JSON, nullable=True),  # Exercise.to_dict() of the exercise attempted
    sa.Column("solution_shown", sa.Boolean, nullable=True),  # None in rows stored before it was kept
    sa.Index("ix_attempts_profile_at", "profile", "at"),
)

# A learner's private profile: an id never shown to anyone, which attempts.profile holds.
# source: "browser" (an anonymous browser), "login" (the signed-in user of st.login) or "legacy" (a
# profile name typed before profiles were private, registered by the migration so its data is kept).
profiles = sa.Table(
    "profiles", metadata,
    sa.Column("id", sa.String(100), primary_key=True),
    sa.Column("source", sa.String(10), nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
)

# The secrets that open a profile, stored only as their SHA-256: the random id a browser keeps in its
# cookie (purpose "browser", one per browser linked) and the recovery code (purpose "recovery", at most one);
# purpose "handoff": a profile waiting for a browser to take it at its next page load (the server sets the cookie).
profile_keys = sa.Table(
    "profile_keys", metadata,
    sa.Column("key_hash", sa.String(64), primary_key=True),
    sa.Column("profile_id", sa.String(100), sa.ForeignKey("profiles.id", ondelete="CASCADE"), nullable=False,
              index=True),
    sa.Column("purpose", sa.String(10), nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    # the browser a browser secret was issued to (a digest of that browser's own id cookie): a
    # secret presented by another browser (a planted cookie) files nothing until its user confirms.
    # None: issued before this was kept (bound to the first browser that presents it)
    sa.Column("browser", sa.String(64), nullable=True),
)


def database_url(env: dict[str, str] | None = None) -> str:
    """DATABASE_URL (PostgreSQL, driven by psycopg 3) if set, else the SQLite file ATTENTION_DB_PATH."""
    env = os.environ if env is None else env
    url = env.get("DATABASE_URL", "").strip()
    if url:
        return normalise_url(url)
    path = Path(env.get("ATTENTION_DB_PATH", "").strip() or DEFAULT_SQLITE_PATH)
    return f"sqlite:///{path}"


def normalise_url(url: str) -> str:
    """postgres:// and postgresql:// (as hosts hand them out) use the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def add_missing_columns(engine: Engine) -> list[str]:
    """Add the nullable columns a database made by an older version lacks ("table.column" added).

    create_all makes missing tables only; a column added to the schema later (the stored exercise and
    its version) is added here, nullable, so old rows read as "not stored"."""
    added = []
    for _ in range(2):  # a second pass when another replica added a column at the same moment
        try:
            existing = sa.inspect(engine)
            for table in metadata.sorted_tables:
                have = {c["name"] for c in existing.get_columns(table.name)}
                for column in table.columns:
                    if column.name in have or not column.nullable:
                        continue
                    kind = column.type.compile(dialect=engine.dialect)
                    with writing(engine).begin() as conn:
                        conn.exec_driver_sql(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}')
                    added.append(f"{table.name}.{column.name}")
            return added
        except (sa.exc.ProgrammingError, sa.exc.OperationalError):
            continue
    return added


def register_legacy_profiles(engine: Engine) -> list[str]:
    """The migration to private profiles: every profile name that attempts were stored under before
    profiles were private becomes a "legacy" profile, so its data is kept (and can be claimed with a
    recovery code) while no one reaches it by typing its name. Idempotent; the names registered now."""
    for _ in range(2):  # a second pass when another replica registered the same names at that moment
        try:
            with engine.connect() as conn:
                known = sa.select(profiles.c.id)
                missing = [str(r.profile) for r in conn.execute(
                    sa.select(attempts.c.profile).where(attempts.c.profile.not_in(known)).distinct()).all()]
            if missing:
                now = datetime.now(UTC).replace(tzinfo=None)
                with writing(engine).begin() as conn:
                    conn.execute(sa.insert(profiles), [{"id": name, "source": "legacy", "created_at": now}
                                                       for name in missing])
            return missing
        except sa.exc.IntegrityError:
            continue
    return []


_WRITERS: dict[str, threading.Lock] = {}  # one per database file: this process's writers take turns
_WRITERS_GUARD = threading.Lock()


def _writer_lock(database: str) -> threading.Lock:
    with _WRITERS_GUARD:
        return _WRITERS.setdefault(os.path.realpath(database) if database != ":memory:" else database,
                                   threading.Lock())


class _QueuedConnection(sqlite3.Connection):
    """A connection whose write transactions queue on the process's lock for its file.

    SQLite's own busy handler makes a waiting writer sleep 1, 2, 5 … 100 ms between tries, so when a
    class of sessions in one server writes at once (30 students opening an assignment) most of them
    sleep past the moment the lock came free: the opens took 4-10 s of wall time for 2.5 s of work.
    Writers of one process wait their turn on a threading.Lock instead (first come, first served, woken
    the moment it is free); other processes (replicas on one file) still meet the busy timeout."""

    writer: threading.Lock
    holding = False

    def begin_write(self) -> None:
        if not self.writer.acquire(timeout=BUSY_TIMEOUT_S):
            raise sqlite3.OperationalError("database is locked (this process's writers are queued)")
        self.holding = True
        try:
            self.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self.holding:
            self.holding = False
            self.writer.release()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._release()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._release()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()


def _sqlite_engine(url: sa.URL) -> Engine:
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    writer = _writer_lock(url.database or ":memory:")

    class Connection(_QueuedConnection):
        pass

    Connection.writer = writer
    # pooled, not one connection per call: closing the last connection to a WAL database
    # checkpoints and deletes the WAL, which costs several fsyncs per operation
    engine = sa.create_engine(url, pool_size=5, max_overflow=10,
                              connect_args={"timeout": BUSY_TIMEOUT_S, "factory": Connection})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see _on_begin)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")  # fsync at each commit: acknowledged means on disk
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        # a writer takes the write lock up front: waits on the busy timeout instead of a deadlock
        # between two readers that both try to upgrade
        if conn.get_execution_options().get("write"):
            conn.connection.dbapi_connection.begin_write()
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


def writing(engine: Engine) -> Engine:
    """The engine to use for a write transaction (`with writing(engine).begin() as conn:`)."""
    return engine.execution_options(write=True)
