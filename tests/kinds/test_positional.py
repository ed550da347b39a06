"""positional: sinusoidal encodings, X + P, and why attention needs them (a permutation only permutes O)."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.core.numbers import round_half_up
from tests.kinds.common import assert_careful_students_are_right, graded_right, named_mistakes

SEEDS = range(50)


def _positional_student(ex, places):
    from exercises.core import pipeline
    from exercises.kinds.positional import attention_given

    g = ex.given
    P = round_half_up(ex.part("P").reference, places)
    answer = {"P": P, "X_P": round_half_up(g["X"] + P, places)}
    if "perm" in g:
        O = pipeline.run(attention_given(g["X"]), rounding=places)["O"]
        answer.update(O=O, O_perm=O[g["perm"].astype(int)])
    return answer


def test_sinusoidal_encoding_is_the_papers_formula():
    from attention_core.positions import sinusoidal

    P = sinusoidal(np.arange(5), 6)
    for p in range(5):
        for i in range(3):
            w = 10000 ** (-2 * i / 6)
            assert P[p, 2 * i] == pytest.approx(np.sin(p * w)) and P[p, 2 * i + 1] == pytest.approx(np.cos(p * w))


@pytest.mark.parametrize("seed", range(20))
def test_attention_without_positions_commutes_with_a_permutation(seed):
    from exercises.kinds.positional import attend

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(int(rng.integers(2, 6)), 4))
    perm = rng.permutation(X.shape[0])
    np.testing.assert_allclose(attend(X[perm]), attend(X)[perm], atol=1e-12)
    from attention_core.positions import sinusoidal
    P = sinusoidal(np.arange(X.shape[0]), 4)
    if not np.array_equal(perm, np.arange(X.shape[0])):  # with positions it no longer does
        assert not np.allclose(attend(X[perm] + P), attend(X + P)[perm])


@pytest.mark.parametrize("level", (1, 2, 3))
def test_positional_references_are_numpy_s(level):
    from attention_core import self_attention

    for seed in SEEDS:
        ex = exercises.generate("positional", seed, level)
        g = ex.given
        n, d = g["X"].shape
        P = np.array([[np.sin(p * 10000 ** (-2 * (c // 2) / d)) if c % 2 == 0 else np.cos(p * 10000 ** (-2 * (c // 2) / d))
                       for c in range(d)] for p in g["pos"]])
        np.testing.assert_allclose(ex.part("P").reference, P, atol=1e-12)
        np.testing.assert_allclose(ex.part("X_P").reference, g["X"] + P, atol=1e-12)
        for a in np.outer(g["pos"], 10000 ** (-2 * np.arange(d // 2) / d)).ravel():
            assert f"{a:g}" in ex.params["table"]
        if level > 1:
            eye = np.eye(d)
            O = self_attention(g["X"], eye, eye, eye).O
            np.testing.assert_allclose(ex.part("O").reference, O, atol=1e-12)
            perm = g["perm"].astype(int)
            np.testing.assert_allclose(ex.part("O_perm").reference, O[perm], atol=1e-12)


@pytest.mark.parametrize("level", (1, 2, 3))
def test_positional_careful_student_who_rounds_is_right(level):
    assert_careful_students_are_right("positional", level, _positional_student)


def test_positional_table_reader_rounding_to_three_places_is_right():
    """A student who reads sin and cos off the 3-decimal table and rounds P to 2 places."""
    for level in (1, 2, 3):
        for seed in range(10):
            ex = exercises.generate("positional", seed, level)
            P = round_half_up(round_half_up(ex.part("P").reference, 3), 2)
            answer = {**_positional_student(ex, 2), "P": P, "X_P": ex.given["X"] + P}
            assert graded_right(ex, answer), ex.id


@pytest.mark.parametrize("level", (1, 2, 3))
def test_positional_mistakes_are_named_exact_and_rounded(level):
    from exercises.kinds import positional as K

    named = named_mistakes("positional", level, lambda ex, part: K.mistakes_of(ex.given, part))
    assert {"positional_sin_cos_swapped", "positional_from_one", "positional_multiplied"} <= named
    if level > 1:
        assert {"positional_one_frequency", "positional_not_permuted", "positional_with_positions", "no_scaling"} <= named
    if level == 3:
        assert "positional_inverse_permutation" in named


@pytest.mark.parametrize("level", [2, 3])
def test_the_permutation_is_shown_from_one_like_the_prose(level):
    """perm is stored 0-based; the page and the sheet show it from 1, as the prompt's order does."""
    from exercises.solutions import given_latex
    from exercises.worksheets import model, text, typst

    for seed in range(20):
        ex = exercises.generate("positional", seed, level)
        one_based = ", ".join(str(int(k) + 1) for k in ex.given["perm"])
        where = f"positional level {level} seed {seed}"
        assert f"order {one_based} " in exercises.core.engine.prompt(ex), where
        assert dict(given_latex(ex))["perm"] == rf"\mathrm{{perm}} = \left({one_based}\right)", where
        shown = {g.name: g for g in model.problem(ex, 1, "en").given}["perm"]
        assert text.latex_given(shown) == rf"\mathrm{{perm}} = ({one_based})", where
        assert typst._typst_given(shown) == f'upright("perm") = ({one_based})', where
