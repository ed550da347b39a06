"""ui/runs.py: a server executes at most a few page runs at once, takes them in about the order they
came, and gives a turn back however a run ends (a rerun or page switch is an exception)."""

from __future__ import annotations

import importlib
import threading
import time

import pytest

from ui import runs


def fresh(monkeypatch, value: str | None):
    if value is None:
        monkeypatch.delenv("ATTENTION_CONCURRENT_RUNS", raising=False)
    else:
        monkeypatch.setenv("ATTENTION_CONCURRENT_RUNS", value)
    return importlib.reload(runs)


def most_at_once(module, threads: int = 8) -> int:
    inside, peak, guard = [0], [0], threading.Lock()

    def run() -> None:
        with module.turn():
            with guard:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.02)
            with guard:
                inside[0] -= 1

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert not any(w.is_alive() for w in workers)
    return peak[0]


@pytest.mark.parametrize(("setting", "limit"), [(None, runs.DEFAULT_RUNS), ("1", 1), ("3", 3), ("bad", runs.DEFAULT_RUNS)])
def test_at_most_the_set_number_of_runs_at_once(monkeypatch, setting, limit):
    module = fresh(monkeypatch, setting)
    try:
        assert most_at_once(module) == limit
    finally:
        fresh(monkeypatch, None)


def test_no_limit_when_set_to_0(monkeypatch):
    module = fresh(monkeypatch, "0")
    try:
        assert most_at_once(module) > runs.DEFAULT_RUNS
    finally:
        fresh(monkeypatch, None)


def test_a_run_that_ends_in_an_exception_gives_its_turn_back(monkeypatch):
    module = fresh(monkeypatch, "1")
    try:
        for _ in range(3):  # Streamlit ends a run for a rerun or a page switch by raising
            with pytest.raises(RuntimeError), module.turn():
                raise RuntimeError("rerun")
        done = threading.Event()
        worker = threading.Thread(target=lambda: (module.turn().__enter__(), done.set()))
        worker.start()
        assert done.wait(10), "the turn was not given back"
    finally:
        fresh(monkeypatch, None)
