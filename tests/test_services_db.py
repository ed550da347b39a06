"""services.db: one engine per database URL per process, whichever thread asks; failures as Unavailable."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

import storage
from services import db


def test_one_engine_per_url_shared_by_threads(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "a.sqlite3"))
    got = []
    threads = [threading.Thread(target=lambda: got.append(db.engine())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(e) for e in got}) == 1 and got[0] is db.engine()
    assert db.url() == f"sqlite:///{tmp_path / 'a.sqlite3'}"
    other = db.engine(f"sqlite:///{tmp_path / 'b.sqlite3'}")
    assert other is not got[0] and other is db.engine(f"sqlite:///{tmp_path / 'b.sqlite3'}")
    with got[0].connect() as conn:  # the tables are there
        assert conn.execute(sa.text("SELECT count(*) FROM assignments")).scalar() == 0


def test_a_database_failure_becomes_unavailable():
    with pytest.raises(db.Unavailable), db.guarded():
        raise sa.exc.OperationalError("SELECT 1", {}, Exception("gone"))
    with pytest.raises(db.Unavailable), db.guarded():
        raise OSError("disk full")
    with pytest.raises(KeyError), db.guarded():
        raise KeyError("not a database error")
    with pytest.raises(storage.AccessDenied), db.guarded():
        raise storage.AccessDenied("ABCD2345")  # a wrong key is an answer, not a failure


def test_no_streamlit_in_the_service_layer():
    import ast
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parent.parent / "services").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not any(name.split(".")[0] in ("streamlit", "ui", "app_pages") for name in names), path.name
