"""Shared test setup: the repository root is importable however pytest is started."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Tests never write into the real database: attempts recorded by page tests (and the browser tests'
# server, which inherits the environment) go to a throwaway SQLite file unless a test picks its own.
if "ATTENTION_DB_PATH" not in os.environ:
    os.environ["ATTENTION_DB_PATH"] = str(Path(tempfile.mkdtemp(prefix="attention-tests-")) / "attention.sqlite3")


@pytest.fixture
def fresh_sqlite(tmp_path, monkeypatch):
    """The app's database as a fresh SQLite file of this test's own (never DATABASE_URL), opened."""
    from storage import open_engine

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "app.sqlite3"))
    engine = open_engine()
    yield engine
    engine.dispose()


SOLUTIONS_KEPT = 2048  # worked solutions the session keeps: seeds 0-9 of every kind and level, and room to spare


@pytest.fixture(scope="session", autouse=True)
def solutions_kept_for_the_session():
    """Worked solutions are kept for the whole session. The app keeps the last walk.CACHE_SIZE (256) exercises'
    solutions (a page shows a few), but the suite's walks solve and render seeds 0-9 of every kind and level
    (about 1,100 exercises, some 140 kB each once rendered) one after another, so with 256 each walk solved
    them all again. One cache of the same function, larger, for the session; exercises.solutions' name for it
    is the same object (a test clears it through that name)."""
    import functools

    from exercises import solutions
    from exercises.solutions import walk

    kept = functools.lru_cache(maxsize=SOLUTIONS_KEPT)(walk._solved.__wrapped__)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(walk, "_solved", kept)
        mp.setattr(solutions, "_solved", kept)
        yield kept


@pytest.fixture(scope="session")
def current_pins():
    """The pins of every kind as the generator draws them now (exercises.cli.pins.compute): computed once
    for the session, from the exercises tests/generated.py makes once, read by the pins test and by every
    test that walks all pinned exercises."""
    from exercises.cli import pins
    from tests import generated

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pins, "generate", generated.exercise)  # the exercises the other walks read
        return pins.compute()


@pytest.fixture(scope="session")
def throwaway_postgres():
    """The URL of a PostgreSQL server for storage tests: DATABASE_URL_TEST when set, else a throwaway
    cluster on 127.0.0.1 started by scripts/start_test_postgres.sh (and stopped after the session);
    None when neither is possible (the tests then fail under CI and skip elsewhere)."""
    if os.environ.get("DATABASE_URL_TEST", "").strip():
        yield os.environ["DATABASE_URL_TEST"].strip()
        return
    script = REPO_ROOT / "scripts" / "start_test_postgres.sh"
    try:
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired):
        yield None
        return
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        sys.stderr.write(f"could not start a throwaway PostgreSQL server:\n{proc.stderr}\n")
        yield None
        return
    try:
        yield lines[-1]
    finally:
        subprocess.run(["bash", str(script), "stop"], capture_output=True, timeout=120)
