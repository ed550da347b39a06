"""The whole backward pass of causal attention, one part per step, last step first.

    G_A = G_O Vᵀ,  G_V = Aᵀ G_O,  G_scaled = A ⊙ (G_A − rowsum(A ⊙ G_A)),  G_scores = G_scaled / √d_k,
    G_Q = G_scores K,  G_K = G_scoresᵀ Q  [,  G_W_* = Xᵀ G_*,  G_X = G_Q W_Qᵀ + G_K W_Kᵀ + G_V W_Vᵀ]

A is a real softmax of its stated, masked scores, and its weights are still simple fractions: the
queries are whole multiples of c = √d_k · ln 2 (at level 3 W_Q is), so every scaled score is a whole
multiple m of ln 2 and e^{m ln 2} = 2^m. A row such as [ln 2, 0] gives the weights [2/3, 1/3]: not the
plain mean, so averaging the gradients instead of weighting them (Σ a·g) gives a wrong answer.
"""

from __future__ import annotations

import math

import numpy as np

from attention_core import scaled_dot_product, self_attention

from ...core import misconceptions, numbers, pipeline
from ...core.contract import HomeStage
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.numbers import nonzero_matrix
from .._shared.values import whole_values

ID = "backprop"
ORDER = 270
VERSION = 3  # 3: the forward pass the first of a batch of candidates checked at once with numpy (weights at
# level 3 from the set of all admissible matrices), no draw-and-reject loop; 2: A a non-uniform softmax
# of scores in ln 2 (was the uniform causal matrix at every seed);
# d_k ≤ d_model at level 3; sizes within the time budget (exercises.core.budget)
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("grad_a_transposed", "grad_v_no_transpose", "softmax_grad_missing_term", "grad_scores_no_scale",
          "grad_k_no_transpose", "softmax_grad_sign", "softmax_grad_diagonal_only", "grad_q_transposed",
          "grad_scores_times_sqrt_dk", "grad_x_no_value_path", "grad_x_no_key_path", "grad_x_no_query_path",
          "grad_x_query_path_only", "grad_x_key_path_only", "grad_x_value_path_only")
# level: (tokens n, d_k, d_v, width d of X (0: Q, K, V are given))
SIZES = {1: (2, 2, 1, 0), 2: (3, 4, 1, 0), 3: (3, 2, 1, 2)}
UNIT = {d_k: math.sqrt(d_k) * math.log(2) for d_k in (2, 4)}  # q = c·q': a scaled score q·k/√d_k = (q'·k) ln 2
MAX_EXPONENT = 2  # |m| of the visible scaled scores m ln 2: weights of 2^m, denominators up to 7
PARTS = ["G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K"]
PROJECTION_PARTS = ["G_W_Q", "G_W_K", "G_W_V", "G_X"]
SIGNED = (-1, 0, 1)
MAX_BATCHES = 50


def plain_mean_weights(n: int) -> np.ndarray:
    """The uniform causal matrix (row i is 1/i on its visible keys): the "plain mean" mistake's A."""
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]  # (n, n)


BATCH = {1: 32, 2: 32, 3: 512}  # candidates drawn at once (about 1 in 2, 1 and 100 has small exponents)


def _exponents_fit_batch(m: np.ndarray) -> np.ndarray:
    """Per candidate of a batch of exponents (B, n, n): the visible ones small, and some row with two
    visible keys not uniform (else A is the plain mean)."""
    n = m.shape[1]
    visible = np.tril(np.ones((n, n), dtype=bool))
    small = np.abs(np.where(visible, m, 0)).max(axis=(1, 2)) <= MAX_EXPONENT
    uneven = (np.abs(np.where(visible, m - m[:, :, :1], 0)) > 1e-8).any(axis=(1, 2))
    return small & uneven


def _candidates(rng: np.random.Generator, level: int) -> list[dict]:
    """A batch of forward passes whose exponents are small whole numbers and not all alike in a row,
    checked at once with numpy: the queries (or W_Q) in units of c, keys (or X) of distinct rows."""
    n, d_k, d_v, d = SIZES[level]
    B = BATCH[level]
    whole = whole_values(level)
    if d == 0:
        K = numbers.matrices(rng, B, (n, d_k), SIGNED)  # (B, n, d_k)
        Q_whole = numbers.matrices(rng, B, (n, d_k), SIGNED)  # (B, n, d_k): the queries in units of c
        V = numbers.matrices(rng, B, (n, d_v), whole)  # (B, n, d_v)
        ok = (numbers.no_zero_lines(K) & numbers.distinct_rows(K) & numbers.no_zero_lines(V)
              & _exponents_fit_batch(Q_whole @ np.swapaxes(K, 1, 2)))
        return [{"Q": UNIT[d_k] * Q_whole[b], "K": K[b], "V": V[b]} for b in np.flatnonzero(ok)]
    X = numbers.matrices(rng, B, (n, d), whole)  # (B, n, d)
    W_K = numbers.pooled_matrices(rng, B, (d, d_k), SIGNED)  # (B, d, d_k), no zero row or column
    W_Q_whole = numbers.pooled_matrices(rng, B, (d, d_k), SIGNED)  # (B, d, d_k), in units of c
    W_V = numbers.pooled_matrices(rng, B, (d, d_v), SIGNED)  # (B, d, d_v)
    K, V = X @ W_K, X @ W_V  # (B, n, d_k), (B, n, d_v)
    ok = (numbers.no_zero_lines(X) & numbers.distinct_rows(X) & np.any(V != 0, axis=2).all(axis=1)
          & _exponents_fit_batch(X @ W_Q_whole @ np.swapaxes(K, 1, 2)))
    found = []
    for b in np.flatnonzero(ok):
        W_Q = UNIT[d_k] * W_Q_whole[b]  # (d, d_k)
        found.append({"X": X[b], "W_Q": W_Q, "W_K": W_K[b], "W_V": W_V[b], "Q": X[b] @ W_Q, "K": K[b], "V": V[b]})
    return found


def _forward(rng: np.random.Generator, level: int, given: dict) -> dict | None:
    """The rest of a candidate forward pass (its weights powers of 2 over their sums), or None."""
    n, d_k, d_v, d = SIZES[level]
    Q, K, V = given["Q"], given["K"], given["V"]
    G_O = nonzero_matrix(rng, (n, d_v), whole_values(level))  # (n, d_v)
    G_A = G_O @ V.T  # (n, n)
    if _allclose(G_A, G_A.T):
        return None  # a symmetric G_A cannot tell G_O Vᵀ from V G_Oᵀ (checked before the forward pass)
    tr = scaled_dot_product(Q, K, V, causal=True)
    if _allclose(_plain_mean(n).T @ G_O, tr.A.T @ G_O):
        return None  # averaging the gradients would give G_V
    return {**given, "A": tr.A, "d_k": d_k, "causal": True, "G_O": G_O}


def _allclose(a: np.ndarray, b: np.ndarray) -> bool:
    """np.allclose(a, b) of finite arrays, written out (its rtol 1e-5 and atol 1e-8): faster."""
    return bool(np.all(np.abs(a - b) <= 1e-8 + 1e-5 * np.abs(b)))


_PLAIN_MEAN = {n: plain_mean_weights(n) for n in {size[0] for size in SIZES.values()}}


def _plain_mean(n: int) -> np.ndarray:
    return _PLAIN_MEAN[n]


MUTE = 1e-13  # far below _teaches' 1e-12: a cell this small by numpy's products is below it by the pipeline's


def _surely_mute(given: dict) -> bool:
    """True only where _teaches refuses the candidate: the backward pass done with a few products (no
    pipeline run, no parts) leaves a later row of G_scaled, all of G_Q or of G_K, or at level 3 one of
    G_X's paths, with no cell above MUTE. A cell between MUTE and 1e-12 is left to _teaches."""
    A, G_O, V, Q, K = given["A"], given["G_O"], given["V"], given["Q"], given["K"]
    G_A = G_O @ V.T  # (n, n)
    G_Z = A * (G_A - np.sum(A * G_A, axis=1, keepdims=True))  # (n, n); 0 where A is (the masked keys)
    G_S = G_Z / math.sqrt(given["d_k"])

    def mute(M: np.ndarray) -> np.ndarray:
        return np.all(np.abs(M) <= MUTE, axis=1)  # (rows,)
    G_Q, G_K = G_S @ K, G_S.T @ Q
    if mute(G_Z)[1:].any() or mute(G_Q).all() or mute(G_K).all():
        return True
    if "X" not in given:
        return False
    paths = (G_Q @ given["W_Q"].T, G_K @ given["W_K"].T, (A.T @ G_O) @ given["W_V"].T)  # (n, d) each
    return any(mute(path).all() for path in paths)


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
    """The first candidate of a batch that teaches every step and fits the time budget. At level 3 a
    candidate the engine's redraw test would refuse because two mistakes give the same G_X (the most
    common reason there) is refused here already, and a new batch drawn, as the engine's call of
    generate again would: the same variants, without building a refused one's exercise and running
    every guarded mistake on it."""
    from ...core import budget

    s = spec(level)
    n, d_k, d_v, _ = SIZES[level]
    names = PARTS + (PROJECTION_PARTS if level == 3 else [])
    for _ in range(MAX_BATCHES):
        for candidate in _candidates(rng, level):
            given = _forward(rng, level, candidate)
            if given is None or _surely_mute(given):
                continue
            env = pipeline.run(given)
            parts = reference_parts(given, names, s.decimals, env)
            if not _teaches(given, parts):
                continue
            # level 3 always fits (tests/test_kinds_backward_redraw.py counts its worst case)
            if level < 3 and budget.count(given, names, env).minutes > budget.BUDGET_MINUTES[level]:
                continue
            if level == 3 and misconceptions.clash_by_part({p.name: p for p in parts}, {"G_X": _g_x_mistakes(env)}):
                break  # the engine would refuse it and call generate again: a new batch
            return Draft(given=given, parts=parts, params={"n": n, "d_k": d_k, "d_v": d_v})
    raise RuntimeError(f"backprop: no forward pass with simple-fraction weights in {MAX_BATCHES} batches")


def _g_x_mistakes(env: dict) -> dict[str, np.ndarray]:
    """{mistake: the G_X it gives} of the guarded mistakes made at G_Q, G_K or G_X, each computed as the
    step registry computes it (exercises.core.steps: G_Q_MISTAKES, G_K_MISTAKES, G_X_MISTAKES)."""
    Q, K, G_S = env["Q"], env["K"], env["G_scores"]
    paths = {"Q": env["G_Q"] @ env["W_Q"].T, "K": env["G_K"] @ env["W_K"].T, "V": env["G_V"] @ env["W_V"].T}
    v_path = env["G_V"] @ env["W_V"].T
    out = {"grad_k_no_transpose": paths["Q"] + (G_S @ Q) @ env["W_K"].T + v_path,
           "grad_q_transposed": (G_S.T @ K) @ env["W_Q"].T + paths["K"] + v_path}
    for mid, kept in (("grad_x_no_value_path", "QK"), ("grad_x_no_key_path", "QV"), ("grad_x_no_query_path", "KV"),
                      ("grad_x_query_path_only", "Q"), ("grad_x_key_path_only", "K"),
                      ("grad_x_value_path_only", "V")):
        out[mid] = sum(paths[m] for m in kept)
    return out


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
