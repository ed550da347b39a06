"""Grading's feedback, bit for bit, over many answers (issue 14, grading cost): a digest of every
Feedback field (parts' values, cells, statuses, scores, format and cell errors, misconceptions,
explanations, the message and the sanity warnings, with their parameters' types) for right, rounded,
wrong, noisy, unreadable, grid, numeric and misshapen answers to every kind and level. A change that
makes grading cheaper must leave it unchanged; a change that means to alter feedback retakes it.
"""

from __future__ import annotations

import hashlib

import numpy as np

import exercises
from exercises.cli import selftest
from exercises.i18n import Msg

SEEDS = range(10)
DIGEST = "d07d6a7fefea0364"  # retaken after merging multi_head VERSION 5 and kv_cache's new draws: the same digest
# with the grading code before the fast paths (the merge's first parent) and after
GRADINGS = 5670


def _m(value) -> str:
    """A Msg (or None) with its parameters' types: 3 and np.int64(3) differ."""
    if value is None:
        return "None"
    if isinstance(value, Msg):
        return f"Msg({value.key!r}, {{{', '.join(f'{k!r}: {_m(v)}' for k, v in value.params.items())}}})"
    return f"{type(value).__name__}:{value!r}"


def _a(array) -> str:
    if array is None:
        return "None"
    array = np.asarray(array)
    return f"{array.dtype}{array.shape}:{array.tobytes().hex() if array.dtype != object else list(array.flat)}"


def _feedback(fb) -> str:
    parts = []
    for name, p in fb.parts.items():
        parts.append("|".join([name, _a(p.value), _a(p.cells), _a(p.status), repr(p.score), _m(p.format_error),
                               repr(sorted((rc, _m(e)) for rc, e in p.cell_errors.items())), repr(p.misconception),
                               _m(p.explanation)]))
    return "\n".join([*parts, repr(fb.score), repr(fb.correct), repr(fb.misconception), _m(fb.message),
                      *(_m(w) for w in fb.warnings)])


def _rounded(ex) -> dict:
    """Every part written rounded to its own decimals (the careful student's typing)."""
    answer = selftest.correct_answer(ex)
    for p in ex.parts:
        if not p.is_choice:
            answer[p.name] = "\n".join(", ".join("-inf" if np.isneginf(x) else f"{x:.{p.decimals}f}" for x in row)
                                       for row in p.reference)
    return answer


def _noisy(ex, rng) -> dict:
    """Cells moved by about a tolerance (some in, some out), now and then a −∞ or a transposed part."""
    answer = selftest.correct_answer(ex)
    for p in ex.parts:
        if p.is_choice or rng.random() < 0.4:
            continue
        value = np.array(p.reference, dtype=float)
        value = value + p.tolerance * rng.choice([0.0, 0.0, 0.5, -0.9, 1.5, -3.0, 40.0], size=value.shape)
        if rng.random() < 0.25:
            value[tuple(rng.integers(s) for s in value.shape)] = -np.inf
        if rng.random() < 0.1:
            value = value.T
        answer[p.name] = selftest.as_text(value)
    return answer


def _grid_or_numbers(ex, rng) -> dict:
    """Some parts as grids of cell texts (one cell blank or odd now and then), some as arrays."""
    answer = selftest.correct_answer(ex)
    for p in ex.parts:
        if p.is_choice:
            answer[p.name] = int(p.reference[0, 0]) if rng.random() < 0.5 else answer[p.name]
            continue
        value = np.array(p.reference, dtype=float) + rng.choice([0.0, 0.0, 0.0, 1.0], size=p.shape)
        if rng.random() < 0.5:
            grid = [[selftest.format_cell(x) for x in row] for row in value]
            if rng.random() < 0.3:
                grid[0][-1] = str(rng.choice(["", "1/2", "e^0", "−1", "abc"]))
            answer[p.name] = grid
        else:
            answer[p.name] = value
    if rng.random() < 0.1:
        answer.pop(ex.parts[-1].name)
    return answer


def _gradings():
    rng = np.random.default_rng(5620)
    for kind in sorted(exercises.KINDS):
        for level in exercises.KINDS[kind].LEVELS:
            for seed in SEEDS:
                ex = exercises.generate(kind, seed, level)
                answers = [selftest.correct_answer(ex), _rounded(ex), selftest.incorrect_answer(ex, rng),
                           selftest.incorrect_answer(ex, rng), selftest.invalid_answer(ex, rng), _noisy(ex, rng),
                           _grid_or_numbers(ex, rng)]
                for answer in answers:
                    yield f"{kind}/{level}/{seed}\n{_feedback(exercises.grade(ex, answer))}\n"


def digest() -> tuple[str, int]:
    h, count = hashlib.sha256(), 0
    for text in _gradings():
        h.update(text.encode())
        count += 1
    return h.hexdigest()[:16], count


def test_grading_feedback_is_unchanged():
    assert digest() == (DIGEST, GRADINGS)


if __name__ == "__main__":  # python -m tests.test_grading_digest: the digest to write above
    print(digest())
