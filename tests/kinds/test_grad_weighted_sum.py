"""grad_weighted_sum: G_A = G_O Vᵀ and G_V = Aᵀ G_O, through O = A V."""

from __future__ import annotations

import numpy as np

import exercises
from exercises.core import engine, misconceptions
from exercises.core.draft import reference_parts
from exercises.core.levels import spec
from exercises.core.model import Exercise
from exercises.kinds import grad_weighted_sum


def test_golden_example_through_grad_weighted_sum():
    draft = grad_weighted_sum.build(A=[[0.5, 0.5]], V=[[2, 4], [6, 8]], G_O=[[1, 2]])
    ex = Exercise(kind="grad_weighted_sum", seed=0, level=1, version=grad_weighted_sum.VERSION,
                  given=draft.given, parts=tuple(draft.parts), params=draft.params)
    np.testing.assert_array_equal(ex.part("G_A").reference, [[10, 22]])
    assert ex.part("G_A").decimals == 0
    np.testing.assert_array_equal(ex.part("G_V").reference, [[0.5, 1], [0.5, 1]])  # Aᵀ G_O
    assert exercises.grade(ex, {"G_A": "10 22", "G_V": "1/2 1; 0.5 1"}).correct
    fb = exercises.grade(ex, {"G_A": "10 21", "G_V": "0.5 1; 0.5 1"})
    assert fb.parts["G_A"].cells.tolist() == [[True, False]]


def test_golden_chain_rule_adds_both_paths():
    """DESIGN §10 / the reference text: a_2 feeds O_1 and O_2, so 1·6 + 2·8 = 22 (and 1·2 + 2·4 = 10)."""
    draft = grad_weighted_sum.build(A=[[0.5, 0.5]], V=[[2, 4], [6, 8]], G_O=[[1, 2]])
    ex = Exercise(kind="grad_weighted_sum", seed=0, level=1, version=grad_weighted_sum.VERSION,
                  given=draft.given, parts=tuple(draft.parts), params=draft.params)
    chain = exercises.solve(ex)[0]
    assert chain.name == "chain_G_A"
    shown = chain.display(exact=True)
    assert r"\frac{\partial L}{\partial O_{11}} \frac{\partial O_{11}}{\partial A_{12}}" in shown
    assert r"1 \cdot 6 + 2 \cdot 8" in shown and shown.endswith(r"&= 22 \end{aligned}")
    matrix = exercises.solve(ex)[1]
    assert matrix.name == "G_A" and matrix.decimals == (("10", "22"),)


def _exercise(kind, level: int, draft) -> Exercise:
    return Exercise(kind=kind.ID, seed=0, level=level, version=kind.VERSION, given=draft.given,
                    parts=tuple(draft.parts), params=draft.params)


def test_grad_weighted_sum_refuses_only_what_the_engine_refuses():
    refused = 0
    for level in grad_weighted_sum.LEVELS:
        s = spec(level)
        for seed in range(60):
            rng = engine.rng_for("grad_weighted_sum", seed, level)
            n = 2 if level == 1 else int(rng.choice(s.n))
            d_v = int(rng.integers(2, 4))
            A = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None] if seed % 2 else np.full((n, n), 1 / n)
            V = rng.integers(-2, 3, (n, d_v)).astype(float)
            G_O = rng.integers(-2, 3, (n, d_v)).astype(float)
            given = grad_weighted_sum._given(A, V, G_O, bool(seed % 2))
            parts = reference_parts(given, grad_weighted_sum.PARTS, s.decimals)
            draft = grad_weighted_sum._draft(given, parts)
            answers = grad_weighted_sum._answers(given, s.decimals)
            assert all(np.array_equal(answers[p.name].reference, p.reference) and answers[p.name].decimals == p.decimals
                       for p in parts)
            ours = misconceptions.clash_by_part(answers, grad_weighted_sum._mistakes(given))
            theirs = bool(misconceptions.collisions(_exercise(grad_weighted_sum, level, draft),
                                                    guards=grad_weighted_sum.GUARDS))
            assert ours == theirs, (level, seed)
            refused += ours
    assert refused > 0  # the test sees refusals, not only variants that pass
