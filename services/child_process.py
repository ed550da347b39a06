"""A Python child process that runs the app's own code off the server, bounded: its address space capped,
niced behind the server's requests, BLAS on one thread. It is told its work as one JSON line on stdin and
answers on stdout (a binary pipe; stderr is discarded). The caller reads it, waits for it and kills it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_ROOT = str(Path(__file__).resolve().parent.parent)

# Run before the child's own code: argv[1] is the app's root, argv[2] the address space in bytes (where the
# platform has no RLIMIT_AS the child runs uncapped).
_PRELUDE = """
import json, os, sys
try:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]),) * 2)
except (ImportError, ValueError, OSError):
    pass
os.nice(5)  # behind the server's own requests
sys.path.insert(0, sys.argv[1])
"""


def start(code: str, memory: int, head: Mapping[str, Any], env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """`code` run in a child after the prelude (address space `memory` bytes, niced, the app importable),
    with `head` written to its stdin as one ASCII JSON line (no text in it breaks the line) and stdin closed.
    `env` adds to the server's environment. OSError when it cannot start or be told (the child killed)."""
    child = subprocess.Popen([sys.executable, "-c", _PRELUDE + code, _ROOT, str(memory)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                                  "MKL_NUM_THREADS": "1", **(env or {})})
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(json.dumps(head, ensure_ascii=True).encode("ascii") + b"\n")
        child.stdin.close()
    except OSError:
        child.kill()
        child.wait()
        raise
    return child
