"""Backward through the row-wise softmax: G_scaled = A ⊙ (G_A − rowsum(A ⊙ G_A)).

Within a row, ∂a_j/∂z_k = a_j (δ_jk − a_k): raising one score raises its own weight and lowers all
the others. So ∂L/∂z_k = Σ_j G_A[j] a_j (δ_jk − a_k) = a_k (G_A[k] − Σ_j a_j G_A[j]). A masked cell
has weight 0, so its gradient is exactly 0.

The exercise is built row by row (each row of G_Z depends on its own rows of A and G_A alone) from rows
known to be admissible: at levels 1 and 2 every answer has two decimals at most, and every row past the
first has a gradient.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from attention_core.ops import apply_mask, softmax

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import choice, softmax_counts
from .._shared import backward as B
from .._shared.values import whole_values
from .._shared.weights import scores_text

ID = "grad_softmax"
ORDER = 220
VERSION = 3
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("softmax_grad_missing_term", "softmax_grad_sign", "softmax_grad_diagonal_only")
SHORT_LEVELS = (1, 2)  # every gradient cell has two decimals at most (level 3: thirds, sixths over four keys)


# ---------------------------------------------------------------- the rows, built to be admissible
#
# Row i of G_Z depends on row i of A and of G_A alone: (G_Z)_ik = a_k (g_k − r), r = Σ_m a_m g_m. With
# a = c / q (whole counts c ≥ 1 on the v keys the row sees) that is c_k (q g_k − s) / q², s = Σ_m c_m g_m.
# So a row is drawn whole from the rows already known to be admissible:
# - it has a gradient (some cell ≠ 0) exactly when g is not constant on its visible keys (r is a weighted
#   mean of them, every a_k > 0); a row past the first with no gradient at all teaches nothing;
# - at SHORT_LEVELS every cell has at most two decimals: 100 c_k (q g_k − s) ≡ 0 (mod q²) for every k.


def _shares(level: int) -> list[int]:
    """The row sums q a level's weights may have (numbers.simple_weights' rule: divisors of 12)."""
    return sorted({int(m * d) for d in spec(level).denominators for m in (1, 2) if 12 % int(m * d) == 0})


def _compositions(q: int, v: int):
    """Every way to write q as v whole counts ≥ 1, in order."""
    for cuts in itertools.combinations(range(1, q), v - 1):
        bounds = (0, *cuts, q)
        yield tuple(bounds[k + 1] - bounds[k] for k in range(v))


def _short_row(counts: tuple[int, ...], g: tuple[int, ...]) -> bool:
    q = sum(counts)
    s = sum(c * x for c, x in zip(counts, g))
    return all(100 * c * (q * x - s) % (q * q) == 0 for c, x in zip(counts, g))


def _rows(level: int, v: int, mute: bool) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """Every admissible (counts, visible G_A) of a row seeing v keys at a SHORT_LEVEL, each weight row once
    (the counts in lowest terms: 2/4 is 1/2); `mute`: a row without gradient may be taken (the first row).
    At most a few hundred rows, enumerated once per (level, v, mute)."""
    key = (level, v, mute)
    if key not in _ROWS:
        values = whole_values(level)
        weights = sorted({tuple(x // math.gcd(*c) for x in c) for q in _shares(level) if q >= v
                          for c in _compositions(q, v)})
        _ROWS[key] = tuple((c, g) for c in weights for g in itertools.product(values, repeat=v)
                           if (mute or v == 1 or min(g) != max(g)) and _short_row(c, g))
    return _ROWS[key]


_ROWS: dict[tuple[int, int, bool], tuple] = {}


def _free_row(rng: np.random.Generator, level: int, v: int, mute: bool, values: tuple[int, ...]):
    """A row of a level without the short rule: q and its spread as numbers.simple_weights draws them,
    the visible G_A drawn again (alone) while it is constant and a gradient is needed."""
    shares = [q for q in _shares(level) if q >= v]
    q = shares[int(rng.integers(len(shares)))]
    counts = 1 + np.bincount(rng.integers(v, size=q - v), minlength=v)
    while True:
        g = tuple(values[k] for k in rng.integers(len(values), size=v))
        if mute or v == 1 or min(g) != max(g):
            return tuple(int(c) for c in counts), g


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A (masked) softmax A and an incoming G_A built row by row from admissible rows: every row past the
    first has a gradient, and at SHORT_LEVELS every cell of G_Z has at most two decimals."""
    s = spec(level)
    n = choice(rng, s.n)
    causal = bool(rng.integers(2))
    values = whole_values(level)
    A = np.zeros((n, n))  # (n, n), rows sum to 1
    G_A = np.zeros((n, n))  # (n, n), small integers
    counts = np.zeros((n, n), dtype=int)  # A = counts / rowsum, in lowest terms; 0 where the mask hides a key
    for i in range(n):
        v = i + 1 if causal else n
        mute = i == 0
        if level in SHORT_LEVELS:
            table = _rows(level, v, mute)
            c, g = table[int(rng.integers(len(table)))]
        else:
            c, g = _free_row(rng, level, v, mute, values)
        A[i, :v] = np.array(c) / sum(c)
        G_A[i, :v] = g
        if v < n:  # what G_A holds where the mask hides a key (its gradient is 0 whatever it is)
            G_A[i, v:] = [values[k] for k in rng.integers(len(values), size=n - v)]
        counts[i, :v] = [x // math.gcd(*c) for x in c]
    given = {"A": A, "G_A": G_A, "causal": causal}
    return Draft(given=given, parts=reference_parts(given, ["G_scaled"], s.decimals),
                 params={"n": n, "scores_behind": scores_text(counts)})


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

HOME = HomeStage.of_steps("backward", "G_scaled")
SHEET = SheetSection("backward", (
    Formula.step("G_scaled", "formulas.grad_softmax.rowsum"),
    Formula(r"(G_Z)_{ij} = A_{ij} \left((G_A)_{ij} - r_{i}\right)", "formulas.grad_softmax.cell"),
    Formula(r"A_{ij} = 0 \ \ (j > i) \ \Rightarrow\ (G_Z)_{ij} = 0", "formulas.grad_softmax.masked"),
))
