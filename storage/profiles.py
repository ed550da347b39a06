"""Private profiles: who a learner's practice attempts belong to, and the secrets that open them.

A profile id is random and never shown; attempts.profile holds it. A browser keeps a random secret
(its cookie) and a learner may make a recovery code; both are stored only as their SHA-256, so the
database alone opens no one's profile. Profile names typed before profiles were private are
registered as "legacy" profiles by the migration (their attempts stay where they are) and are opened
only with a recovery code the operator issues (``python -m services.profiles claim NAME``).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .db import attempts, profile_keys, profiles, writing

SOURCES = ("browser", "login", "legacy")
PURPOSES = ("browser", "recovery", "handoff")


def key_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def new_profile_id() -> str:
    """A fresh random profile id (128 bits): never typed, never shown."""
    return "p-" + secrets.token_hex(16)


def create_profile(engine: Engine, source: str, secret: str | None = None, purpose: str = "browser",
                   profile_id: str | None = None, browser: str | None = None) -> str:
    """A new profile (with the secret that opens it, when given, issued to `browser`); its id."""
    if source not in SOURCES or purpose not in PURPOSES:
        raise ValueError(f"unknown profile source or key purpose: {source!r}, {purpose!r}")
    chosen = profile_id or new_profile_id()
    with writing(engine).begin() as conn:
        conn.execute(sa.insert(profiles).values(id=chosen, source=source, created_at=_now()))
        if secret is not None:
            conn.execute(sa.insert(profile_keys).values(key_hash=key_hash(secret), profile_id=chosen,
                                                        purpose=purpose, created_at=_now(), browser=browser))
    return chosen


def ensure_profile(engine: Engine, profile_id: str, source: str) -> str:
    """The profile `profile_id`, created if missing (a signed-in user's, whose id is derived from them)."""
    with engine.connect() as conn:
        if conn.execute(sa.select(profiles.c.id).where(profiles.c.id == profile_id)).first() is not None:
            return profile_id
    try:
        return create_profile(engine, source, profile_id=profile_id)
    except sa.exc.IntegrityError:  # another session of the same user created it at that moment
        return profile_id


def profile_exists(engine: Engine, profile_id: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(sa.select(profiles.c.id).where(profiles.c.id == profile_id)).first() is not None


def profile_for_secret(engine: Engine, secret: str, purpose: str) -> str | None:
    """The profile a secret opens (a browser's cookie or a recovery code), or None."""
    with engine.connect() as conn:
        row = conn.execute(sa.select(profile_keys.c.profile_id).where(
            profile_keys.c.key_hash == key_hash(secret), profile_keys.c.purpose == purpose)).first()
    return None if row is None else str(row.profile_id)


def add_secret(engine: Engine, profile_id: str, secret: str, purpose: str, replace: bool = False,
               browser: str | None = None, keep_browser: str | None = None) -> None:
    """Link a secret to a profile (a browser secret issued to `browser`); with `replace`, the profile's
    earlier secrets of that purpose stop working. `keep_browser`: every browser secret of the profile
    but this one stops working too, in the same transaction (a new recovery code signs out the others)."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown key purpose {purpose!r}")
    with writing(engine).begin() as conn:
        if replace:
            conn.execute(sa.delete(profile_keys).where(profile_keys.c.profile_id == profile_id,
                                                       profile_keys.c.purpose == purpose))
        if keep_browser is not None:
            _drop_browsers(conn, profile_id, keep_browser)
        conn.execute(sa.insert(profile_keys).values(key_hash=key_hash(secret), profile_id=profile_id,
                                                    purpose=purpose, created_at=_now(), browser=browser))


def _drop_browsers(conn: Any, profile_id: str, keep: str) -> int:
    """Every browser secret of the profile but `keep` goes, and every profile waiting for a browser to
    take it (add_handoff) but the one waiting for `keep`'s own browser."""
    kept = conn.execute(sa.select(profile_keys.c.browser).where(profile_keys.c.key_hash == key_hash(keep))).first()
    waiting = [profile_keys.c.profile_id == profile_id, profile_keys.c.purpose == "handoff"]
    if kept is not None and kept.browser is not None:
        waiting.append(profile_keys.c.browser != kept.browser)
    conn.execute(sa.delete(profile_keys).where(*waiting))
    return int(conn.execute(sa.delete(profile_keys).where(
        profile_keys.c.profile_id == profile_id, profile_keys.c.purpose == "browser",
        profile_keys.c.key_hash != key_hash(keep))).rowcount or 0)


def sign_out_browsers(engine: Engine, profile_id: str, keep: str) -> int:
    """Every browser secret of the profile but `keep` stops opening it; the number signed out."""
    with writing(engine).begin() as conn:
        return _drop_browsers(conn, profile_id, keep)


def browser_of(engine: Engine, secret: str) -> tuple[str, str | None] | None:
    """(profile id, the browser it was issued to) of a browser secret, or None when it opens nothing."""
    with engine.connect() as conn:
        row = conn.execute(sa.select(profile_keys.c.profile_id, profile_keys.c.browser).where(
            profile_keys.c.key_hash == key_hash(secret), profile_keys.c.purpose == "browser")).first()
    return None if row is None else (str(row.profile_id), row.browser)


def bind_browser(engine: Engine, secret: str, browser: str) -> bool:
    """From now on the browser secret belongs to `browser` (its user confirmed the profile is theirs);
    False when the secret opens nothing."""
    with writing(engine).begin() as conn:
        return bool(conn.execute(sa.update(profile_keys).where(
            profile_keys.c.key_hash == key_hash(secret), profile_keys.c.purpose == "browser")
            .values(browser=browser)).rowcount)


def _handoff_key(browser: str) -> str:
    return key_hash("handoff\x1f" + browser)


def add_handoff(engine: Engine, profile_id: str, browser: str) -> None:
    """The browser `browser` (a digest of its id) is to keep a secret of `profile_id` from its next page
    load on (one waiting profile per browser: a later one replaces it)."""
    with writing(engine).begin() as conn:
        conn.execute(sa.delete(profile_keys).where(profile_keys.c.key_hash == _handoff_key(browser)))
        conn.execute(sa.insert(profile_keys).values(key_hash=_handoff_key(browser), profile_id=profile_id,
                                                    purpose="handoff", created_at=_now(), browser=browser))


def take_handoff(engine: Engine, browser: str, secret: str) -> str | None:
    """The profile waiting for `browser`, now opened by the new browser secret `secret` issued to it (in
    the same transaction the wait ends); None when no profile waits."""
    waiting = sa.select(profile_keys.c.profile_id).where(
        profile_keys.c.key_hash == _handoff_key(browser), profile_keys.c.purpose == "handoff")
    with engine.connect() as conn:  # a page load without one takes no write lock
        if conn.execute(waiting).first() is None:
            return None
    with writing(engine).begin() as conn:
        row = conn.execute(waiting).first()
        if row is None:  # another page load of this browser took it at that moment
            return None
        conn.execute(sa.delete(profile_keys).where(profile_keys.c.key_hash == _handoff_key(browser)))
        conn.execute(sa.insert(profile_keys).values(key_hash=key_hash(secret), profile_id=row.profile_id,
                                                    purpose="browser", created_at=_now(), browser=browser))
    return str(row.profile_id)


def has_secret(engine: Engine, profile_id: str, purpose: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(sa.select(profile_keys.c.key_hash).where(
            profile_keys.c.profile_id == profile_id, profile_keys.c.purpose == purpose).limit(1)).first() is not None


def delete_profile(engine: Engine, profile_id: str) -> int:
    """Delete a profile, the secrets that open it and every attempt stored under it; the attempts deleted.

    On SQLite the deleted rows are overwritten (secure_delete) and the write-ahead log is checkpointed
    and truncated, so no copy of them stays in the -wal file (45 copies of a deleted id)."""
    sqlite = engine.dialect.name == "sqlite"
    with writing(engine).begin() as conn:
        if sqlite:
            conn.exec_driver_sql("PRAGMA secure_delete=ON")
        try:
            gone = conn.execute(sa.delete(attempts).where(attempts.c.profile == profile_id)).rowcount
            conn.execute(sa.delete(profile_keys).where(profile_keys.c.profile_id == profile_id))
            conn.execute(sa.delete(profiles).where(profiles.c.id == profile_id))
        finally:
            if sqlite:
                conn.exec_driver_sql("PRAGMA secure_delete=OFF")
    if sqlite:
        _truncate_log(engine)
    return int(gone or 0)


def _truncate_log(engine: Engine, tries: int = 20) -> bool:
    """Checkpoint SQLite's write-ahead log into the file and truncate it (a reader in the middle of a
    transaction holds it back: a few more tries). True when the log is empty."""
    raw = engine.raw_connection()  # outside any transaction: the log's pages go into the file
    try:
        for _ in range(tries):
            busy, _log, _done = raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return True
            time.sleep(0.05)
        return False
    finally:
        raw.close()


def legacy_profiles(engine: Engine) -> dict[str, int]:
    """{legacy profile name: attempts stored under it}."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(profiles.c.id, sa.func.count(attempts.c.id))
            .select_from(profiles.outerjoin(attempts, attempts.c.profile == profiles.c.id))
            .where(profiles.c.source == "legacy").group_by(profiles.c.id).order_by(profiles.c.id)).all()
    return {str(name): int(count) for name, count in rows}


def profile_rows(engine: Engine, profile_id: str) -> dict[str, Any] | None:
    """A profile's own row (source, created_at), or None."""
    with engine.connect() as conn:
        row = conn.execute(sa.select(profiles).where(profiles.c.id == profile_id)).first()
    return None if row is None else {"source": row.source, "created_at": row.created_at.replace(tzinfo=UTC)}
