"""Backward through the row-wise softmax: G_scaled = A ⊙ (G_A − rowsum(A ⊙ G_A)).

Within a row, ∂a_j/∂z_k = a_j (δ_jk − a_k): raising one score raises its own weight and lowers all
the others. So ∂L/∂z_k = Σ_j G_A[j] a_j (δ_jk − a_k) = a_k (G_A[k] − Σ_j a_j G_A[j]). A masked cell
has weight 0, so its gradient is exactly 0.
"""

from __future__ import annotations

import numpy as np

from attention_core.ops import apply_mask, softmax, softmax_backward

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import choice, matrix, simple_weights, softmax_counts
from .._shared.values import whole_values
from .._shared.weights import scores_behind

ID = "grad_softmax"
ORDER = 220
VERSION = 2  # 2: A is a real softmax (positive wherever the mask lets a key be seen), its scores stated
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("softmax_grad_missing_term", "softmax_grad_sign", "softmax_grad_diagonal_only")
TRIES = 24  # draws of (A, G_A) looked at for an answer in short decimals
SHORT_LEVELS = (1, 2)  # at level 3 (thirds, sixths over four keys) a short answer is too rare to look for


def _short(G: np.ndarray) -> bool:
    """Every cell has at most two decimal places: np.allclose(100 G, round(100 G), atol=1e-9) written
    out (its rtol 1e-5 kept; the cells are finite), which is faster."""
    scaled = G * 100
    whole = np.round(scaled)
    return bool(np.all(np.abs(scaled - whole) <= 1e-9 + 1e-5 * np.abs(whole)))


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = choice(rng, s.n)
    causal = bool(rng.integers(2))
    fallback = None
    values = whole_values(level)
    for _ in range(TRIES):
        # (n, n), rows sum to 1; a row seeing two keys or more is never one-hot, so it has a gradient
        A = simple_weights(rng, n, s.denominators, causal)
        G_A = matrix(rng, (n, n), values)  # (n, n), small integers
        G = softmax_backward(A, G_A)  # (n, n)
        if not np.any(np.abs(G) > 1e-12, axis=1)[1:].all():
            continue  # a row past the first with no gradient at all teaches nothing
        fallback = (A, G_A)
        if level not in SHORT_LEVELS or _short(G):
            break
    A, G_A = fallback if fallback is not None else (A, G_A)
    given = {"A": A, "G_A": G_A, "causal": causal}
    return Draft(given=given, parts=reference_parts(given, ["G_scaled"], s.decimals),
                 params={"n": n, "scores_behind": scores_behind(A)})


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The prompt, and the scores A is the softmax of (variants before version 2 do not state them)."""
    return ("kind.grad_softmax.prompt", *(("kind.grad_softmax.prompt_scores",) if "scores_behind" in ex.params else ()))


def softmax_input(A: np.ndarray) -> np.ndarray:
    """The scores the prompt states, whose row-wise softmax is A: Z = ln c for the whole counts c of
    each row (A = c / rowsum(c)); a zero weight has c = 0, Z = −∞, a masked score."""
    with np.errstate(divide="ignore"):
        return np.log(softmax_counts(A).astype(float))  # (n, n)


def loss_for(causal: bool):
    def loss(p: dict[str, np.ndarray]) -> float:
        """L = Σ A ⊙ G_A with A = softmax(mask(Z))."""
        return float(np.sum(softmax(apply_mask(p["Z"], causal)) * p["G_A"]))
    return loss


def solve(ex) -> list:
    """The softmax Jacobian of one row, the matrix form, then a finite-difference check."""
    from .._shared import backward as B

    v = B.values_of(ex)
    A = np.asarray(v["A"], dtype=float)
    i = B.widest_row(A)
    cell = B.largest(np.where(A > 0, v["G_scaled"], 0.0), rows=[i])  # a visible key of that row
    point = {"Z": softmax_input(A), "G_A": v["G_A"]}
    extra = [("Z_{ik}", "=", r"\ln c_{ik}, \quad A_{ik} = \frac{c_{ik}}{\sum_{k'} c_{ik'}} \quad (\ln 0 = -\infty)")]
    return B.assemble(ex, {"G_scaled": [B.jacobian(v, i, B.places_of(ex, "G_scaled"))]},
                      [B.check(ex, loss_for(bool(ex.given.get("causal", False))),
                               r"\sum_{i,k} A_{ik} (G_A)_{ik}, \quad A = \operatorname{softmax}(Z)", point, "Z", cell,
                               "G_scaled", extra)])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("backward", r"G_Z = A \odot (G_A - \operatorname{rowsum}(A \odot G_A))")
SHEET = SheetSection("backward", (
    Formula(r"[[G_Z | n | n]] = A \odot \left(G_A - r \mathbf{1}^{\top}\right), \qquad "
            r"r_{i} = \sum_{k} A_{ik} (G_A)_{ik}", "formulas.grad_softmax.rowsum"),
    Formula(r"(G_Z)_{ij} = A_{ij} \left((G_A)_{ij} - r_{i}\right)", "formulas.grad_softmax.cell"),
    Formula(r"A_{ij} = 0 \ \ (j > i) \ \Rightarrow\ (G_Z)_{ij} = 0", "formulas.grad_softmax.masked"),
))
