"""Every kind can test itself: a right, a wrong and an unreadable answer for any exercise."""

from __future__ import annotations

import numpy as np

from ..core.model import Exercise, Part


def format_cell(x: float) -> str:
    """A reference value as a learner would type it (−∞ as -inf, enough digits to be right)."""
    if np.isneginf(x):
        return "-inf"
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.6f}"


def as_text(value: np.ndarray) -> str:
    """A matrix as one pasted block: one row per line, cells separated by commas."""
    return "\n".join(", ".join(format_cell(x) for x in row) for row in np.atleast_2d(value))


def correct_answer(ex: Exercise) -> dict[str, str]:
    """The reference of every part, typed as text."""
    return {p.name: _choice_text(p, int(p.reference[0, 0])) if p.is_choice else as_text(p.reference)
            for p in ex.parts}


def incorrect_answer(ex: Exercise, rng: np.random.Generator) -> dict[str, str]:
    """The reference with one cell of one part clearly changed."""
    answer = correct_answer(ex)
    part = ex.parts[int(rng.integers(len(ex.parts)))]
    if part.is_choice:
        wrong = (int(part.reference[0, 0]) + 1 + int(rng.integers(len(part.options) - 1))) % len(part.options)
        answer[part.name] = _choice_text(part, wrong)
        return answer
    value = np.array(part.reference, dtype=float)
    r, c = int(rng.integers(value.shape[0])), int(rng.integers(value.shape[1]))
    value[r, c] = 1.0 if not np.isfinite(value[r, c]) else value[r, c] + 1 + int(rng.integers(3))
    answer[part.name] = as_text(value)
    return answer


def invalid_answer(ex: Exercise, rng: np.random.Generator) -> dict[str, str]:
    """The reference with one cell replaced by text that cannot be read."""
    answer = correct_answer(ex)
    part = ex.parts[int(rng.integers(len(ex.parts)))]
    if part.is_choice:
        answer[part.name] = "Z?"
        return answer
    rows = [[format_cell(x) for x in row] for row in part.reference]
    r, c = int(rng.integers(len(rows))), int(rng.integers(len(rows[0])))
    rows[r][c] = ["1/0", "abc", "2**", "(1+2", "import os", "", "1e999"][int(rng.integers(7))]
    answer[part.name] = rows  # a grid of cell texts, as the answer grid sends it
    return answer


def _choice_text(part: Part, index: int) -> str:
    return chr(ord("A") + index)
