"""Shared helpers for AppTest page tests."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

import exercises
from exercises.cli import selftest
from ui.practice_state import answer_prefix

ROOT = Path(__file__).resolve().parent.parent


def open_page(page: str, query: dict[str, str] | None = None, lang: str | None = None) -> AppTest:
    """Run app.py, then switch to `page` (a path like app_pages/practice.py) with the given URL query."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    if lang:
        at.session_state["lang"] = lang
    at.run()
    at.switch_page(page)
    at.run()
    return at


def current_exercise(at: AppTest) -> exercises.Exercise:
    state = at.session_state
    return exercises.generate(state["practice.kind"], state["practice.seed"], state["practice.level"])


def fill_cells(at: AppTest, ex: exercises.Exercise, values: dict[str, list[list[str]]]) -> None:
    """Type text into the answer grid cells of each part (keys from ui.answer_grid)."""
    from ui.answer_grid import cell_key
    for name, rows in values.items():
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                at.text_input(key=cell_key(answer_prefix(ex), name, i, j)).input(text)


def reference_cells(ex: exercises.Exercise) -> dict[str, list[list[str]]]:
    return {p.name: [[selftest.format_cell(x) for x in row] for row in p.reference] for p in ex.parts}


def click_check(at: AppTest) -> None:
    next(b for b in at.button if b.label in ("Check", "检查")).click()
    at.run()
