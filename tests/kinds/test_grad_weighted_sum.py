"""grad_weighted_sum: G_A = G_O Vᵀ and G_V = Aᵀ G_O, through O = A V."""

from __future__ import annotations

import numpy as np

import exercises
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
