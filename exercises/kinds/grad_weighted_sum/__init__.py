"""Backward through O = A V: G_A = G_O Vᵀ and G_V = Aᵀ G_O.

a_ij multiplies value row j in every column of output row i, so its gradient adds one path per
column: ∂L/∂a_ij = Σ_c G_O[i,c] V[j,c]. Value cell V[j,c] reaches output column c of every row i
through a_ij: ∂L/∂V[j,c] = Σ_i a_ij G_O[i,c].
"""

from __future__ import annotations

import numpy as np

from attention_core.ops import weighted_sum, weighted_sum_backward

from ...core import misconceptions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, decimals_for, nonzero_matrix, simple_weights
from .._shared import backward as B
from .._shared.values import whole_values
from .._shared.weights import scores_behind

ID = "grad_weighted_sum"
ORDER = 200
VERSION = 3
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("grad_a_transposed", "grad_v_no_transpose", "grad_a_no_transpose")
PARTS = ["G_A", "G_V"]


def build(A, V, G_O, causal: bool = False, decimals: int = 2) -> Draft:
    """The exercise for given A (n_q, n), V (n, d_v) and G_O (n_q, d_v); references from the pipeline."""
    given = _given(A, V, G_O, causal)
    return _draft(given, reference_parts(given, PARTS, decimals))


def _given(A, V, G_O, causal: bool) -> dict:
    return {"A": np.asarray(A, dtype=float),  # (n_q, n), rows sum to 1
            "V": np.asarray(V, dtype=float),  # (n, d_v)
            "G_O": np.asarray(G_O, dtype=float),  # (n_q, d_v)
            "causal": bool(causal)}


def _draft(given: dict, parts: list) -> Draft:
    n, d_v = given["V"].shape
    return Draft(given=given, parts=parts, params={"n": n, "d_v": d_v, "scores_behind": scores_behind(given["A"])})


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A variant none of whose guarded mistakes gives the right answer or another's: the engine's
    redraw test, answered here from the three products (its redraw would draw the next variant from
    the same generator, as this loop does), so a refused variant costs no draft and no run of the
    pipeline's mistakes."""
    from ...core.engine import MAX_REDRAWS  # imported here: the engine imports every kind as it loads

    s = spec(level)
    for _ in range(MAX_REDRAWS):
        n = 2 if level == 1 else choice(rng, s.n)  # three tokens at level 1 take over its 5 minutes
        d_v = 2 if level < 3 else choice(rng, (2, 3))
        causal = bool(rng.integers(2))
        A = simple_weights(rng, n, s.denominators, causal=causal)  # (n, n)
        V = nonzero_matrix(rng, (n, d_v), s.values)  # (n, d_v)
        G_O = nonzero_matrix(rng, (n, d_v), whole_values(level))  # (n, d_v), small integers
        given = _given(A, V, G_O, causal)
        if not misconceptions.clash_by_part(_answers(given, s.decimals), _mistakes(given)):
            break
    return _draft(given, reference_parts(given, PARTS, s.decimals))


def _answers(given: dict, decimals: int) -> dict[str, Part]:
    """The parts as reference_parts makes them, from attention_core's backward of O = A V (the function
    the pipeline's steps call) without a pipeline run: for the redraw test."""
    G_A, G_V = weighted_sum_backward(given["A"], given["V"], given["G_O"])
    return {name: Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals))
            for name, ref in (("G_A", np.asarray(G_A, dtype=float)), ("G_V", np.asarray(G_V, dtype=float)))}


def _mistakes(given: dict) -> dict[str, dict[str, np.ndarray]]:
    """{part: {guarded mistake: its value}}, each computed as the step registry computes it, where it applies."""
    A, V, G_O = given["A"], given["V"], given["G_O"]
    g_a = {"grad_a_transposed": V @ G_O.T}  # (n_k, d_v) @ (d_v, n_q)
    if G_O.shape[1] == V.shape[0]:
        g_a["grad_a_no_transpose"] = G_O @ V
    by_part = {"G_A": g_a}
    if A.shape[0] == A.shape[1]:
        by_part["G_V"] = {"grad_v_no_transpose": A @ G_O}
    return by_part


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The prompt, and the scores A is the softmax of (variants before version 3 do not state them)."""
    return ("kind.grad_weighted_sum.prompt",
            *(("kind.grad_weighted_sum.prompt_scores",) if "scores_behind" in ex.params else ()))


def loss(p: dict[str, np.ndarray]) -> float:
    """L = Σ O ⊙ G_O with O = A V: any loss whose gradient at O is G_O has these gradients."""
    return float(np.sum(weighted_sum(p["A"], p["V"]) * p["G_O"]))


LOSS_LATEX = r"\sum_{i,c} O_{ic} (G_O)_{ic}, \quad O = A V"


def solve(ex) -> list:
    """One weight's and one value's chain rule, the matrix forms, then a finite-difference check."""
    v = B.values_of(ex)
    i, j = B.largest(v["G_A"])
    k, c = B.largest(v["G_V"])
    point = {name: v[name] for name in ("A", "V", "G_O")}
    return B.assemble(ex, {"G_A": [B.chain_weights(v, i, j, B.places_of(ex, "G_A"))],
                           "G_V": [B.chain_values(v, k, c, B.places_of(ex, "G_V"))]},
                      [B.check(ex, loss, LOSS_LATEX, point, "A", (i, j), "G_A")])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage.of_steps("backward", "G_A", "G_V")
SHEET = SheetSection("backward", (
    Formula.step("G_A"), Formula.step("G_V"),
    Formula(r"(G_A)_{ij} = \sum_{k=1}^{d_v} (G_O)_{ik} V_{jk}, \qquad (G_V)_{jk} = \sum_{i=1}^{n} A_{ij} (G_O)_{ik}",
            "formulas.grad_weighted_sum.cells"),
    Formula(r"G_O = \begin{bmatrix} 1 & 2 \end{bmatrix},\ V = \begin{bmatrix} 2 & 4 \\ 6 & 8 \end{bmatrix}"
            r"\ \Rightarrow\ G_A = G_O V^{\top} = \begin{bmatrix} 10 & 22 \end{bmatrix}",
            "formulas.grad_weighted_sum.example"),
))
