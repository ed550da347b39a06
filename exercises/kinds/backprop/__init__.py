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

from attention_core import ops, scaled_dot_product, self_attention

from ...core.contract import HomeStage
from ...core.levels import spec
from ...core.numbers import distinct_rows, matrices, no_zero_lines, pooled_matrices
from ...core.sampler import Batch
from .._shared.values import whole_values

ID = "backprop"
ORDER = 270
VERSION = 7
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the sampler keeps them apart
GUARDS = ("grad_a_transposed", "grad_v_no_transpose", "softmax_grad_missing_term", "grad_scores_no_scale",
          "grad_k_no_transpose", "softmax_grad_sign", "softmax_grad_diagonal_only", "grad_q_transposed",
          "grad_scores_times_sqrt_dk", "grad_x_no_value_path", "grad_x_no_key_path", "grad_x_no_query_path",
          "grad_x_query_path_only", "grad_x_key_path_only", "grad_x_value_path_only")
# level: (tokens n, d_k, d_v, width d of X (0: Q, K, V are given))
SIZES = {1: (2, 2, 1, 0), 2: (2, 4, 1, 0), 3: (3, 2, 1, 2)}
MAX_EXPONENT = 2  # |m| of the visible scaled scores m ln 2: weights of 2^m
MAX_DENOMINATOR = 12  # of every weight: A is shown as fractions (numbers.as_fraction)
SIGNED = (-1, 0, 1)  # entries of K and of the weights; Q (level 3: W_Q) in units of c
# Q and W_Q are shown as whole numbers times the unit √d_k · ln 2 (Q = √2 ln 2 · [[1, 0], [−1, 1]]): the hand
# work multiplies small numbers, the unit once per cell of G_K (and of G_X's query path)
GIVEN_SHOWN = {"Q": "root_dk_ln2", "W_Q": "root_dk_ln2"}
TOKEN_VALUES = (-1, 0, 1, 2)  # entries of X at level 3: small, so x W_Q W_Kᵀ yᵀ stays within ±2 often
PARTS = ["G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K"]
SHORT = {1: ("G_K",)}  # left out at a level, within its minutes (exercises.core.budget): level 1 stops at G_Q
PROJECTION_PARTS = ["G_W_Q", "G_W_K", "G_W_V", "G_X"]
BATCH = 64


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of forward passes whose scaled scores are whole multiples of ln 2, with their softmax A and
    an incoming gradient G_O of whole nonzero numbers."""
    n, d_k, d_v, d = SIZES[level]
    unit = math.sqrt(d_k) * math.log(2)  # q·k / √d_k = (q'·k) ln 2 for q = unit · q'
    whole = whole_values(level)
    nonzero = [v for v in whole if v != 0]
    if d == 0:
        given = {"Q": unit * matrices(rng, BATCH, (n, d_k), SIGNED),  # (B, n, d_k)
                 "K": matrices(rng, BATCH, (n, d_k), SIGNED),  # (B, n, d_k)
                 "V": matrices(rng, BATCH, (n, d_v), nonzero)}  # (B, n, d_v)
    else:
        X = matrices(rng, BATCH, (n, d), TOKEN_VALUES)  # (B, n, d)
        W = {"W_Q": unit * pooled_matrices(rng, BATCH, (d, d_k), SIGNED),  # (B, d, d_k), no zero line
             "W_K": pooled_matrices(rng, BATCH, (d, d_k), SIGNED),  # (B, d, d_k)
             "W_V": pooled_matrices(rng, BATCH, (d, d_v), SIGNED)}  # (B, d, d_v)
        given = {"X": X, **W, **{name: X @ W[f"W_{name}"] for name in "QKV"}}
    given["A"] = ops.softmax(ops.apply_mask(ops.scale(ops.scores(given["Q"], given["K"]), d_k), True))  # (B, n, n)
    given["G_O"] = matrices(rng, BATCH, (n, d_v), nonzero)  # (B, n, d_v)
    stacked = tuple(given)
    given.update(d_k=d_k, causal=True)
    asked = [p for p in PARTS if p not in SHORT.get(level, ())] + (PROJECTION_PARTS if d else [])
    return Batch(given, stacked, asked, params={"n": n, "d_k": d_k, "d_v": d_v},
                 keep=_teaches, decimals=spec(level).decimals)


def _teaches(env) -> np.ndarray:
    """Per candidate: distinct nonzero keys, no zero column in K (in X at level 3, nor a zero token),
    visible exponents m within ±MAX_EXPONENT, no zero value and two first values that differ (else the
    softmax passes nothing back there), weights that are not the plain mean (its G_V is wrong), a G_A that
    is not symmetric (else V G_Oᵀ looks right), and a gradient reaching every step: each row of G_scaled
    after the first, G_Q, G_K and, from X, each of its three paths."""
    ok = no_zero_lines(env["K"], columns=False) & distinct_rows(env["K"])
    ok &= _shown_as_fractions(env["A"])
    ok &= no_zero_lines(env["X"] if "X" in env else env["K"], rows="X" in env)
    m = env["scaled"] / math.log(2)  # (B, n, n): the exponents, whole by construction
    visible = np.tril(np.ones(m.shape[1:], dtype=bool))
    ok &= (np.abs(np.where(visible, m, 0)) <= MAX_EXPONENT + 1e-9).all(axis=(1, 2))
    V = env["V"]  # (B, n, d_v)
    ok &= (V != 0).any(axis=2).all(axis=1) & (V[:, 0] != V[:, 1]).any(axis=1)
    n = m.shape[1]
    plain_mean = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]  # (n, n)
    ok &= _differ(plain_mean.T @ env["G_O"], env["G_V"])
    ok &= _differ(env["G_A"], np.swapaxes(env["G_A"], 1, 2))
    ok &= _alive(env["G_scaled"])[:, 1:].all(axis=1) & _alive(env["G_Q"]).any(axis=1) & _alive(env["G_K"]).any(axis=1)
    if "X" in env:
        for g, w in (("G_Q", "W_Q"), ("G_K", "W_K"), ("G_V", "W_V")):
            ok &= _alive(env[g] @ np.swapaxes(env[w], 1, 2)).any(axis=1)
    return ok


def _shown_as_fractions(A: np.ndarray) -> np.ndarray:
    """Per candidate: every weight a fraction with a denominator of at most MAX_DENOMINATOR, so that A is shown
    as fractions (8/9), never as 6-digit decimals (8/17 = 0.470588). (B,)"""
    scaled = A[..., None] * np.arange(1, MAX_DENOMINATOR + 1)  # (B, n, n, denominators)
    return (np.abs(scaled - np.round(scaled)) < 1e-9).any(axis=-1).all(axis=(1, 2))


def _alive(M: np.ndarray) -> np.ndarray:
    """Per candidate and row: some cell is not 0. (B, rows)"""
    return np.abs(M).max(axis=-1) > 1e-12


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per candidate: not np.allclose(a, b)."""
    return ~(np.abs(a - b) <= 1e-8 + 1e-5 * np.abs(b)).reshape(len(a), -1).all(axis=1)


# ---------------------------------------------------------------- worked solution


def solve(ex) -> list:
    """Every step's matrix form, each preceded by its derivation (one cell's chain rule, the softmax
    Jacobian of the widest row, where 1/√d_k comes from, why Xᵀ), and a finite-difference check of
    the deepest gradient through the whole forward pass."""
    from .._shared import backward as B  # sympy, through the LaTeX printer: only when a solution is shown

    v = B.values_of(ex)
    places = {p.name: p.decimals for p in ex.parts}
    i, j = B.largest(v["G_A"])
    row = B.widest_row(v["A"])
    before = {"G_A": [B.chain_weights(v, i, j, places["G_A"])],
              "G_V": [B.chain_values(v, *B.largest(v["G_V"]), places["G_V"])],
              "G_scaled": [B.jacobian(v, row, places["G_scaled"])],
              "G_scores": [B.scale(v, *B.largest(v["G_scaled"]), places["G_scores"])],
              "G_Q": [B.chain_queries(v, *B.largest(v["G_Q"]), places["G_Q"])]}
    if "G_K" in places:
        before["G_K"] = [B.chain_keys(v, *B.largest(v["G_K"]), places["G_K"])]
    from_x = "X" in ex.given
    if from_x:
        before["G_W_Q"] = [B.chain_weight_matrix(v, "Q", *B.largest(v["G_W_Q"]), places["G_W_Q"])]
        before["G_X"] = [B.chain_inputs(v, *B.largest(v["G_X"]), places["G_X"])]
        name, part = "X", "G_X"
        point = {k: v[k] for k in ("X", "W_Q", "W_K", "W_V")}
    else:
        name, part = "Q", "G_Q"
        point = {k: v[k] for k in ("Q", "K", "V")}
    G_O = np.asarray(v["G_O"])

    def loss(p: dict[str, np.ndarray]) -> float:
        """L = Σ O ⊙ G_O with O the whole causal forward pass (from X at level 3)."""
        if from_x:
            return float(np.sum(self_attention(p["X"], p["W_Q"], p["W_K"], p["W_V"], causal=True).O * G_O))
        return float(np.sum(scaled_dot_product(p["Q"], p["K"], p["V"], causal=True).O * G_O))

    loss_latex = (r"\sum_{i,c} O_{ic} (G_O)_{ic}, \quad O = \operatorname{softmax}\left(\operatorname{mask}"
                  r"\left(\frac{Q K^{\top}}{\sqrt{d_k}}\right)\right) V")
    extra = [("Q, K, V", "=", r"X W_Q,\; X W_K,\; X W_V")] if from_x else []
    cell = _check_cell(loss, point, name, np.asarray(v[part]), B)
    return B.assemble(ex, before, [B.check(ex, loss, loss_latex, point, name, cell, part, extra)])


def _check_cell(loss, point: dict, name: str, gradient: np.ndarray, B) -> tuple[int, int]:
    """The cell the finite-difference check takes: the largest of `gradient` (B.largest) unless the
    central difference there, from the losses as the check shows them (B.LOSS_PLACES), misses it by
    1e-5 or more (a sharp curve along that entry); then the largest cell where it agrees so well."""
    first = B.largest(gradient)
    cells = [first] + sorted((c for c in np.ndindex(gradient.shape) if c != first), key=lambda c: -abs(gradient[c]))
    for cell in cells:
        sides = []
        for sign in (1.0, -1.0):
            moved = {k: np.array(x, dtype=float) for k, x in point.items()}
            moved[name][cell] += sign * B.H
            sides.append(round(loss(moved), B.LOSS_PLACES))
        if abs((sides[0] - sides[1]) / (2 * B.H) - gradient[cell]) < 0.5e-5:
            return cell
    return first


def prompt_keys(ex) -> tuple[str, ...]:
    """Level 1 stops at G_Q (an exercise stored before then asks G_K too)."""
    return ("kind.backprop.prompt_1" if ex.level == 1 and "G_K" not in ex.part_names else "kind.backprop.prompt",)


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"G_O \to G_X")
