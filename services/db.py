"""The one database provider: a process-wide engine per database URL, shared by every session.

SQLAlchemy engines are thread-safe (each operation checks a connection out of the pool), so one per
URL serves every session of a Streamlit server; the lock makes sure two sessions asking at once get
the same one.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Engine

import storage

_LOCK = threading.Lock()


class Unavailable(RuntimeError):
    """The database could not be read or written (a connection, disk or SQL failure)."""


@functools.cache
def _engine(url: str) -> Engine:
    return storage.open_engine(url)


def url() -> str:
    """The configured database's URL (DATABASE_URL, else the SQLite file)."""
    return storage.database_url()


def engine(url: str | None = None) -> Engine:
    """The engine for `url` (default: the configured database, DATABASE_URL or the SQLite file)."""
    chosen = storage.normalise_url(url) if url else storage.database_url()
    with _LOCK:
        return _engine(chosen)


@contextmanager
def guarded() -> Iterator[None]:
    """Turn a database failure into Unavailable, so callers need not know SQLAlchemy."""
    try:
        yield
    except storage.AccessDenied:  # a PermissionError, hence an OSError, but an answer, not a failure
        raise
    except (sa.exc.SQLAlchemyError, OSError) as err:
        raise Unavailable(str(err)) from err
