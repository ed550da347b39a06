"""The grading fast paths decide exactly as the general code they skip (issue 14, speed).

- parser.fast_matrix (a plain matrix of decimals) == the general reading parser._read_matrix;
- parse_grid's plain-decimal cells == parse_number;
- grading._cells_right == misconceptions.cell_matches; grading._statuses == np.where(...).astype(object).
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.cli import selftest
from exercises.core import grading, misconceptions, parser, pipeline, sanity
from exercises.core.parser import AnswerError

ALPHABET = list("0123456789") * 3 + list(".,,+-  \t\n\ninf") + ["inf", "-inf", ", ", "\n", ";", "[", "e", "1,5"]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, same values bit for bit (−0.0 is not 0.0; ∞ equals ∞)."""
    return a.shape == b.shape and bool(np.all((a == b) & (np.signbit(a) == np.signbit(b))))


def _general(text: str):
    try:
        return parser._read_matrix(text)
    except AnswerError:
        return None


def _texts() -> list[str]:
    """Every kind's right and wrong answers as typed, then random texts near the fast path's edge."""
    texts = []
    rng = np.random.default_rng(14)
    for kind in exercises.KINDS:
        for level in exercises.KINDS[kind].LEVELS:
            ex = exercises.generate(kind, 3, level)
            texts += [t for t in selftest.correct_answer(ex).values()]
            texts += [t for t in selftest.incorrect_answer(ex, rng).values() if isinstance(t, str)]
    for _ in range(4000):
        texts.append("".join(rng.choice(ALPHABET, size=int(rng.integers(1, 14)))))
    cells = ["0", "-0", "+1", "1.", ".5", "-.25", "123456789012", "1234567890123", "0.1234567890123", "inf",
             "-inf", "+inf", "2.5"]
    separators = [",", ", ", " ,", "\t,\t", ",  "]
    for _ in range(1000):  # well-formed matrices with odd spacing, signs, -0, long digit runs
        rows, cols = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        body = "\n".join(str(rng.choice(separators)).join(str(rng.choice(cells)) for _ in range(cols))
                         for _ in range(rows))
        texts.append(str(rng.choice(["", " ", "\n", " \t\n"])) + body + str(rng.choice(["", " ", "\n\n"])))
    return texts


def test_fast_matrix_reads_as_the_general_reading():
    hits = 0
    for text in _texts():
        fast = parser.fast_matrix(text)
        if fast is None:
            continue
        hits += 1
        slow = _general(text)
        assert slow is not None and _same(fast, slow), repr(text)
        assert _same(parser.parse_answer(text), slow)
    assert hits > 1000  # the fast path is taken, not merely refused


@pytest.mark.parametrize("text", ["1,5", " 1,5 ", "0,5, 0,25", "1, 2\n\n3, 4", "1, 2\n3", "[1, 2]", "1 2",
                                  "1e2", "INF", "-∞", "1, 2\r\n3, 4", "1234567890123", "1;2", ""])
def test_fast_matrix_leaves_the_rest_to_the_general_reading(text):
    assert parser.fast_matrix(text) is None


def test_grid_cells_read_as_parse_number():
    rng = np.random.default_rng(7)
    for _ in range(300):
        grid = [["".join(rng.choice(ALPHABET, size=int(rng.integers(1, 6)))) for _ in range(3)] for _ in range(2)]
        values, errors = parser.parse_grid(grid, "X")
        for r, row in enumerate(grid):
            for c, text in enumerate(row):
                try:
                    expected = parser.parse_number(text)
                except AnswerError:
                    assert (r, c) in errors and np.isnan(values[r, c])
                    continue
                assert (r, c) not in errors and _same(values[r:r + 1, c:c + 1], np.array([[expected]]))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 1e308 - -1e308 overflows, in both
def test_cells_right_is_cell_matches():
    rng = np.random.default_rng(3)
    specials = [np.inf, -np.inf, np.nan, 1e308, -1e308]
    for _ in range(2000):
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        decimals = int(rng.integers(0, 4))
        reference = np.round(rng.normal(size=shape), decimals)
        value = reference + rng.choice([0.0, 0.004, -0.005, 0.0051, 0.1, 1e-10], size=shape)
        for array in (value, reference):
            if rng.random() < 0.3:
                array[tuple(rng.integers(s) for s in shape)] = rng.choice(specials)
        part = exercises.Part("X", shape, reference, decimals=decimals)
        got = grading._cells_right(value, part)
        want = misconceptions.cell_matches(value, part.reference, part.tolerance)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        status = grading._statuses(want)
        old = np.where(want, grading.RIGHT, grading.WRONG).astype(object)
        assert status.dtype == old.dtype and status.shape == old.shape and np.array_equal(status, old)


def _check_as_before(ex, values):
    """sanity.check as it was: every rule that holds for the reference (sanity.rules) put to the answer."""
    read = {name: np.atleast_2d(np.asarray(v, dtype=float)) for name, v in values.items()
            if name in ex.part_names and not ex.part(name).is_choice}
    env = {**pipeline.reference_env(ex), **{k: v for k, v in read.items() if v.shape == ex.part(k).shape}}
    warnings = []
    for part in ex.parts:
        value = read.get(part.name)
        if value is None:
            continue
        if value.shape != part.shape:
            if value.shape == part.shape[::-1]:
                warnings.append(("transposed", part.name))
            continue
        if np.isnan(value).any():
            continue
        for rule in sanity.rules(ex, part):
            warnings.extend(rule(ex, part, value, env))
    return warnings


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_sanity_puts_a_rule_to_the_reference_only_when_the_answer_fails_it(kind):
    """check() tries every rule on the answer first and asks whether it holds for the reference only
    when it warns: the same warnings, in the same order, as putting only the rules that hold."""
    rng = np.random.default_rng(11)
    for level in exercises.KINDS[kind].LEVELS:
        for seed in range(2):
            ex = exercises.generate(kind, seed, level)
            before = exercises.Exercise.from_dict(ex.to_dict())  # the same exercise, nothing memoised
            for _ in range(8):
                values = {}
                for part in ex.parts:
                    value = np.array(part.reference, dtype=float)
                    if rng.random() < 0.6:
                        value = value + rng.choice([0.0, 0.004, -0.3, 1.0], size=part.shape)
                    if rng.random() < 0.2:
                        value[tuple(rng.integers(s) for s in part.shape)] = rng.choice([-np.inf, 2.0, -1.0])
                    values[part.name] = value
                got = [w.to_dict() for w in sanity.check(ex, values)]
                want = [w if isinstance(w, tuple) else w.to_dict() for w in _check_as_before(before, values)]
                assert [w for w in got if w["key"] != "sanity.transposed_shape"] == want
