"""Opening a database: the engine, with the tables created and every migration run (storage.db holds the
schema, storage.fingerprints the fingerprints of stored exercises)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from . import db, lti  # noqa: F401  (lti: its tables join the schema)
from .fingerprints import backfill


def open_engine(url: str | None = None) -> Engine:
    """An engine for `url` (default: database_url()), with the tables created if missing.

    Thread-safe and meant to be shared: services.db keeps one per process and URL."""
    url = db.normalise_url(url) if url else db.database_url()
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = db._sqlite_engine(parsed)
    else:
        connect_args = {} if "connect_timeout" in parsed.query else {"connect_timeout": db.CONNECT_TIMEOUT_S}
        engine = sa.create_engine(parsed, pool_pre_ping=True, pool_size=5, max_overflow=10, connect_args=connect_args)
    try:
        db.metadata.create_all(engine)
    except (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.OperationalError):
        db.metadata.create_all(engine)  # another replica was creating the same tables at that moment
    db.add_missing_columns(engine)
    db.register_legacy_profiles(engine)
    backfill(engine)  # stored exercises from before fingerprints were kept get theirs
    return engine
