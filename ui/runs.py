"""How many page runs of this server execute at once.

Streamlit runs each session's script in its own thread, and every thread needs the one interpreter
lock: when a class arrives at once, thirty runs share one core in 5 ms slices, each finishes only when
nearly all have (the last one's time), and the switching itself costs a third more CPU
(bench/bench_assignment.py: 30 personal links opened at once). A run first takes one of a few turns
(ATTENTION_CONCURRENT_RUNS, default 2; 0: no limit), so runs finish in about the order they came, one
after another, and a long one cannot hold the rest up alone. A run waiting for its turn only waits:
Streamlit's own rerun and stop requests reach it once it has its turn.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

DEFAULT_RUNS = 2


def _slots() -> threading.BoundedSemaphore | None:
    try:
        count = int(os.environ.get("ATTENTION_CONCURRENT_RUNS", DEFAULT_RUNS))
    except ValueError:
        count = DEFAULT_RUNS
    return threading.BoundedSemaphore(count) if count > 0 else None


_SLOTS = _slots()


@contextlib.contextmanager
def turn() -> Iterator[None]:
    """Hold one of the server's turns for the length of a page run."""
    if _SLOTS is None:
        yield
        return
    with _SLOTS:
        yield
