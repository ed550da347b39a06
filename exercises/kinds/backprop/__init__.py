"""The whole backward pass of causal attention, one part per step, last step first.

    G_A = G_O Vᵀ,  G_V = Aᵀ G_O,  G_scaled = A ⊙ (G_A − rowsum(A ⊙ G_A)),  G_scores = G_scaled / √d_k,
    G_Q = G_scores K,  G_K = G_scoresᵀ Q  [,  G_W_* = Xᵀ G_*,  G_X = G_Q W_Qᵀ + G_K W_Kᵀ + G_V W_Vᵀ]

The forward pass is built so that its weights are simple fractions: every query scores all the keys
it may see equally, so row i of A is 1/(i+1) on its visible keys. (Non-causal equal scores would make
A symmetric, and then A G_O could not be told apart from Aᵀ G_O.)
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np

from attention_core import scaled_dot_product, self_attention

from ...draft import Draft, reference_parts
from ...levels import spec
from ...numbers import nonzero_matrix
from .._shared.contract import HomeStage
from .._shared.values import whole_values

ID = "backprop"
ORDER = 270
VERSION = 1
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("grad_a_transposed", "grad_v_no_transpose", "softmax_grad_missing_term", "grad_scores_no_scale",
          "grad_k_no_transpose", "softmax_grad_sign", "softmax_grad_diagonal_only", "grad_q_transposed")
D_K = 4  # √d_k = 2: the one division in the chain stays exact
N = {1: 2, 2: 3, 3: 3}  # level 3 adds the projections rather than a fourth token
D_V = {1: 1, 2: 2, 3: 2}  # at n = 2, one value column keeps every wrong G_A apart from the right one
D = 2  # the width of X at level 3
PARTS = ["G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K"]
PROJECTION_PARTS = ["G_W_Q", "G_W_K", "G_W_V", "G_X"]
MAX_TRIES = 100


@cache
def small_vectors(level: int, width: int = D_K) -> np.ndarray:
    """Every nonzero vector of `width` whole entries from the level's range (at most −2 … 2)."""
    whole = [v for v in whole_values(level) if abs(v) <= 2]
    grid = np.array([v for v in itertools.product(whole, repeat=width) if any(v)], dtype=float)  # (c, width)
    grid.setflags(write=False)
    return grid


def equal_score_queries(rng: np.random.Generator, K: np.ndarray, level: int) -> np.ndarray | None:
    """Queries whose scores are equal over every key they may see (causal): q_i ⊥ k_j − k_0 for j ≤ i.
    None when some row has no such query among the small vectors."""
    n = K.shape[0]
    candidates = small_vectors(level)  # (c, d_k)
    Q = np.zeros((n, D_K))  # (n, d_k)
    for i in range(n):
        D_i = K[1:i + 1] - K[0]  # (i, d_k): the differences the query must not see
        fits = candidates[np.all(np.abs(candidates @ D_i.T) < 1e-12, axis=1)]  # (f, d_k)
        if len(fits) == 0:
            return None
        Q[i] = fits[int(rng.integers(len(fits)))]
    return Q


def equal_score_weights(rng: np.random.Generator, X: np.ndarray, level: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(W_Q, W_K), each (d, d_k), such that query i scores every key it may see equally.

    With M = W_Q W_Kᵀ the scores are X M Xᵀ, so row i is flat over j ≤ i when x_i M (x_j − x_0)ᵀ = 0.
    Those conditions are linear in M: pick a small M that meets them, then split it into W_Q W_Kᵀ.
    None when this X or this split does not work out."""
    n, d = X.shape
    conditions = np.array([np.kron(X[i], X[j] - X[0]) for i in range(1, n) for j in range(1, i + 1)])  # (c, d·d)
    grid = small_vectors(level, d * d)  # (g, d·d)
    fits = grid[np.all(np.abs(grid @ conditions.T) < 1e-9, axis=1)]  # (f, d·d)
    if len(fits) == 0:
        return None
    M = fits[int(rng.integers(len(fits)))].reshape(d, d)  # (d, d)
    candidates = small_vectors(level, D_K)  # (c, d_k)
    W_K = candidates[rng.integers(len(candidates), size=d)]  # (d, d_k)
    if np.linalg.matrix_rank(W_K) < d:
        return None
    products = candidates @ W_K.T  # (c, d): each candidate row of W_Q against the rows of W_K
    W_Q = np.zeros((d, D_K))  # (d, d_k)
    for a in range(d):
        rows = candidates[np.all(np.abs(products - M[a]) < 1e-9, axis=1)]  # rows with w · W_K[b] = M[a, b]
        if len(rows) == 0:
            return None
        W_Q[a] = rows[int(rng.integers(len(rows)))]
    return W_Q, W_K


def _forward(rng: np.random.Generator, level: int) -> dict | None:
    """One candidate forward pass with simple-fraction weights, or None to draw again."""
    n, whole = N[level], whole_values(level)
    given: dict = {}
    if level < 3:
        K = nonzero_matrix(rng, (n, D_K), whole)  # (n, d_k)
        if len({tuple(k) for k in K.tolist()}) < n:
            return None  # two equal keys: their gradients cannot be told apart
        Q = equal_score_queries(rng, K, level)  # (n, d_k)
        if Q is None:
            return None
        V = nonzero_matrix(rng, (n, D_V[level]), whole)  # (n, d_v)
    else:
        X = nonzero_matrix(rng, (n, D), whole)  # (n, d): whole numbers keep a small M within reach
        if len({tuple(x) for x in X.tolist()}) < n:
            return None  # a repeated token: its key would repeat too
        weights = equal_score_weights(rng, X, level)
        if weights is None:
            return None
        W_Q, W_K = weights  # (d, d_k) each
        W_V = nonzero_matrix(rng, (D, D_V[level]), whole)  # (d, d_v)
        Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (n, d_k), (n, d_k), (n, d_v)
        given.update(X=X, W_Q=W_Q, W_K=W_K, W_V=W_V)
    tr = scaled_dot_product(Q, K, V, causal=True)
    G_O = nonzero_matrix(rng, (n, D_V[level]), whole)  # (n, d_v)
    G_A = G_O @ V.T  # (n, n)
    if np.allclose(G_A, G_A.T):
        return None  # a symmetric G_A cannot tell G_O Vᵀ from V G_Oᵀ
    given.update(Q=Q, K=K, V=V, A=tr.A, d_k=D_K, causal=True, G_O=G_O)
    return given


def _teaches(given: dict, parts) -> bool:
    """Every later row of G_scaled gets some gradient, so do the queries and the keys, and at level 3
    each of the three paths into G_X carries something."""
    ref = {p.name: p.reference for p in parts}

    def alive(M: np.ndarray) -> np.ndarray:
        return np.any(np.abs(M) > 1e-12, axis=1)  # (rows,)
    if not (alive(ref["G_scaled"])[1:].all() and alive(ref["G_Q"]).any() and alive(ref["G_K"]).any()):
        return False
    if "X" not in given:
        return True
    paths = (ref["G_Q"] @ given["W_Q"].T, ref["G_K"] @ given["W_K"].T, ref["G_V"] @ given["W_V"].T)  # (n, d) each
    return all(alive(path).any() for path in paths)


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    names = PARTS + (PROJECTION_PARTS if level == 3 else [])
    found = None
    for _ in range(MAX_TRIES):
        given = _forward(rng, level)
        if given is None:
            continue
        found = given, reference_parts(given, names, s.decimals)
        if _teaches(*found):
            break
    if found is None:
        raise RuntimeError(f"backprop: no forward pass with simple-fraction weights in {MAX_TRIES} draws")
    given, parts = found
    return Draft(given=given, parts=parts, params={"n": N[level], "d_k": D_K, "d_v": D_V[level]})


def loss_for(G_O: np.ndarray, from_x: bool):
    def loss(p: dict[str, np.ndarray]) -> float:
        """L = Σ O ⊙ G_O with O the whole causal forward pass (from X at level 3)."""
        if from_x:
            tr = self_attention(p["X"], p["W_Q"], p["W_K"], p["W_V"], causal=True)
        else:
            tr = scaled_dot_product(p["Q"], p["K"], p["V"], causal=True)
        return float(np.sum(tr.O * G_O))
    return loss


def solve(ex) -> list:
    """Every step's matrix form, each preceded by its derivation (one cell's chain rule, the softmax
    Jacobian of the widest row, where 1/√d_k comes from, why Xᵀ), and a finite-difference check of
    the deepest gradient through the whole forward pass."""
    from .._shared import backward as B

    v = B.values_of(ex)
    places = {p.name: p.decimals for p in ex.parts}
    i, j = B.largest(v["G_A"])
    row = B.widest_row(v["A"])
    before = {"G_A": [B.chain_weights(v, i, j, places["G_A"])],
              "G_V": [B.chain_values(v, *B.largest(v["G_V"]), places["G_V"])],
              "G_scaled": [B.jacobian(v, row, places["G_scaled"])],
              "G_scores": [B.scale(v, *B.largest(v["G_scaled"]), places["G_scores"])],
              "G_Q": [B.chain_queries(v, *B.largest(v["G_Q"]), places["G_Q"])],
              "G_K": [B.chain_keys(v, *B.largest(v["G_K"]), places["G_K"])]}
    from_x = "X" in ex.given
    if from_x:
        before["G_W_Q"] = [B.chain_weight_matrix(v, "Q", *B.largest(v["G_W_Q"]), places["G_W_Q"])]
        before["G_X"] = [B.chain_inputs(v, *B.largest(v["G_X"]), places["G_X"])]
        name, part = "X", "G_X"
        point = {k: v[k] for k in ("X", "W_Q", "W_K", "W_V")}
    else:
        name, part = "Q", "G_Q"
        point = {k: v[k] for k in ("Q", "K", "V")}
    loss_latex = (r"\sum_{i,c} O_{ic} (G_O)_{ic}, \quad O = \operatorname{softmax}\left(\operatorname{mask}"
                  r"\left(\frac{Q K^{\top}}{\sqrt{d_k}}\right)\right) V")
    extra = [("Q, K, V", "=", r"X W_Q,\; X W_K,\; X W_V")] if from_x else []
    return B.assemble(ex, before, [B.check(ex, loss_for(np.asarray(v["G_O"]), from_x), loss_latex, point, name,
                                           B.largest(v[part]), part, extra)])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"G_O \to G_X")
