"""Shared test setup: the repository root is importable however pytest is started."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Tests never write into the real database: attempts recorded by page tests (and the browser tests'
# server, which inherits the environment) go to a throwaway SQLite file unless a test picks its own.
if "ATTENTION_DB_PATH" not in os.environ:
    os.environ["ATTENTION_DB_PATH"] = str(Path(tempfile.mkdtemp(prefix="attention-tests-")) / "attention.sqlite3")
