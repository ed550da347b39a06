"""The whole backward pass of causal attention, one part per step, last step first.

    G_A = G_O Vᵀ,  G_V = Aᵀ G_O,  G_scaled = A ⊙ (G_A − rowsum(A ⊙ G_A)),  G_scores = G_scaled / √d_k,
    G_Q = G_scores K,  G_K = G_scoresᵀ Q  [,  G_W_* = Xᵀ G_*,  G_X = G_Q W_Qᵀ + G_K W_Kᵀ + G_V W_Vᵀ]

A is a real softmax of its stated, masked scores, and its weights are still simple fractions: the
queries are whole multiples of c = √d_k · ln 2 (at level 3 W_Q is), so every scaled score is a whole
multiple m of ln 2 and e^{m ln 2} = 2^m. A row such as [ln 2, 0] gives the weights [2/3, 1/3]: not the
plain mean, so averaging the gradients instead of weighting them (Σ a·g) gives a wrong answer.

Built from admissible pieces (issue 14): the keys, then each query row from those whose visible scores are
such multiples with |m| ≤ 2 (the last one weighing its keys unevenly if no earlier row does); at level 3
the weights, then the tokens row by row from a table of their exponents. The incoming gradient G_O is then
drawn from those of the level whose backward pass teaches every step, fits the time budget and keeps
every guarded mistake apart (the engine's redraw test, answered for several G_O at once), so the draft
generate returns is the one the engine keeps.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from attention_core import ops, scaled_dot_product, self_attention

from ...core import budget, numbers
from ...core.contract import HomeStage
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from .._shared import backward as B
from .._shared import chain_batch
from .._shared.values import whole_values

ID = "backprop"
ORDER = 270
VERSION = 4  # 4: constructive (issue 14): the keys drawn as distinct rows and each query row from the rows
# whose visible scores are small (level 3: W_Q and W_K, then X's rows one by one from a table of x W_Q W_Kᵀ yᵀ),
# the first two values unlike (else the softmax passes nothing back), then G_O drawn from the level's incoming
# gradients that pass every test, answered for several at once (_shared/chain_batch); 3: the forward pass
# the first of a batch of candidates checked at once with numpy (weights at level 3 from the set of all
# admissible matrices), no draw-and-reject loop; 2: A a non-uniform softmax of scores in ln 2 (was the
# uniform causal matrix at every seed);
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
MAX_DRAWS = 200


def plain_mean_weights(n: int) -> np.ndarray:
    """The uniform causal matrix (row i is 1/i on its visible keys): the "plain mean" mistake's A."""
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]  # (n, n)


@functools.cache
def _rows(d_k: int) -> np.ndarray:
    """Every row of d_k entries from SIGNED, the zero row first: (3^d_k, d_k), read-only."""
    grids = np.meshgrid(*([np.asarray(SIGNED, dtype=float)] * d_k), indexing="ij")
    rows = np.stack([g.ravel() for g in grids], axis=1)
    rows = rows[np.argsort(np.abs(rows).sum(axis=1) > 0, kind="stable")]  # (3^d_k, d_k)
    rows.setflags(write=False)
    return rows


def _keys(rng: np.random.Generator, n: int, d_k: int) -> np.ndarray:
    """n distinct nonzero rows of SIGNED entries with no zero column: (n, d_k)."""
    rows = _rows(d_k)[1:]  # the nonzero rows
    while True:
        picked = rng.integers(len(rows), size=n)
        if len(set(picked.tolist())) < n:
            continue
        K = rows[picked]
        if (K != 0).any(axis=0).all():
            return K


def _queries(rng: np.random.Generator, K: np.ndarray) -> np.ndarray | None:
    """Query rows in units of c, row i drawn from the rows q whose visible scores q·k_j (j ≤ i) are
    whole numbers within ±MAX_EXPONENT, the last one from those that weigh its keys unevenly unless an
    earlier row already does (else A is the plain mean): (n, d_k), or None when no row fits."""
    rows = _rows(K.shape[1])
    m = rows @ K.T  # (3^d_k, n): every row's exponents against every key
    small = np.cumprod(np.abs(m) <= MAX_EXPONENT, axis=1, dtype=bool)  # [r, i]: visible exponents of row i small
    uneven = np.cumsum(m != m[:, :1], axis=1) > 0  # [r, i]: row i would not weigh its keys alike
    n = K.shape[0]
    chosen = []
    seen_uneven = False
    for i in range(n):
        fits = small[:, i] & uneven[:, i] if i == n - 1 and not seen_uneven else small[:, i]
        options = np.flatnonzero(fits)
        if not len(options):
            return None
        r = options[rng.integers(len(options))]
        seen_uneven |= bool(uneven[r, i])
        chosen.append(r)
    return rows[chosen]


@functools.cache
def _matrices(r: int, c: int) -> np.ndarray:
    """Every r × c matrix of SIGNED entries with no zero row and no zero column (numbers.pooled_matrices'
    pool), read-only: (count, r, c)."""
    rows = _rows(c)
    grids = np.meshgrid(*([np.arange(len(rows))] * r), indexing="ij")
    every = rows[np.stack([g.ravel() for g in grids], axis=1)]  # (3^(r c), r, c)
    every = every[numbers.no_zero_lines(every)]
    every.setflags(write=False)
    return every


@functools.cache
def _weight_pairs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Level 3's (W_Q in units of c, W_K) pairs from the pool of 2×2 SIGNED matrices with no zero row
    or column (56 of them, 3136 pairs): (pool, for each pair its index among the distinct products
    B = W_Q W_Kᵀ (265 of them), the pairs as (first, second) indices)."""
    pool = _matrices(2, 2)
    first, second = np.divmod(np.arange(len(pool) ** 2), len(pool))
    products = pool[first] @ np.swapaxes(pool[second], 1, 2)  # (pairs, 2, 2)
    _, which = np.unique(products.reshape(len(products), -1), axis=0, return_inverse=True)
    which = which.ravel()
    pairs = np.stack([first, second], axis=1)
    for a in (which, pairs):
        a.setflags(write=False)
    return pool, which, pairs


@functools.cache
def _token_scores(level: int) -> tuple[np.ndarray, np.ndarray]:
    """Level 3's table of exponents between tokens: (the nonzero rows x of X's values (35, 2), E with
    E[b, x, y] = x B_b yᵀ for every distinct product B_b (265, 35, 35), whole numbers as int8: 0.3 MB,
    a few ms once). The scaled score of query x and key y is E[b, x, y] ln 2."""
    _, d_k, _, d = SIZES[level]
    rows = np.array([r for r in np.stack(np.meshgrid(*([np.asarray(whole_values(level), dtype=float)] * d),
                                                      indexing="ij"), axis=-1).reshape(-1, d) if r.any()])
    pool, which, pairs = _weight_pairs()
    first = np.zeros(which.max() + 1, dtype=int)
    first[which[::-1]] = np.arange(len(which))[::-1]  # a pair giving each distinct product
    B = pool[pairs[first, 0]] @ np.swapaxes(pool[pairs[first, 1]], 1, 2)  # (265, 2, 2)
    E = np.rint(np.einsum("xa,bac,yc->bxy", rows, B, rows)).astype(np.int8)
    for a in (rows, E):
        a.setflags(write=False)
    return rows, E


def _tokens(rng: np.random.Generator, E: np.ndarray) -> list[int] | None:
    """Token rows (indices into _token_scores' rows) drawn one by one, as _queries draws query rows:
    row i from those whose exponents against the rows before it and itself are within ±MAX_EXPONENT,
    distinct from them, the last one weighing its keys unevenly unless an earlier one does."""
    n = SIZES[3][0]
    chosen: list[int] = []
    seen_uneven = False
    for i in range(n):
        fits = np.abs(np.diagonal(E)) <= MAX_EXPONENT  # x B xᵀ: the token's score against itself
        for j in chosen:
            fits &= np.abs(E[:, j]) <= MAX_EXPONENT
        fits[chosen] = False
        if i == n - 1 and not seen_uneven:
            fits &= np.any(E[:, chosen] != E[:, chosen[:1]], axis=1) | (np.diagonal(E) != E[:, chosen[0]])
        options = np.flatnonzero(fits)
        if not len(options):
            return None
        r = int(options[rng.integers(len(options))])
        if i > 0:
            seen_uneven |= bool(np.any(E[r, chosen + [r]] != E[r, chosen[0]]))
        chosen.append(r)
    return chosen


def _forward(rng: np.random.Generator, level: int) -> dict | None:
    """A forward pass whose scaled scores are small whole multiples of ln 2, not all alike in a row,
    drawn piece by piece from admissible values (None, rarely, when a drawn X leaves nothing to pick)."""
    n, d_k, d_v, d = SIZES[level]
    whole = whole_values(level)
    if d == 0:
        K = _keys(rng, n, d_k)
        Q_whole = _queries(rng, K)
        if Q_whole is None:
            return None
        # d_v = 1: no zero value, and the first two differ (else G_A's second row is alike on the keys it
        # sees and the softmax passes nothing back there, whatever G_O is)
        nonzero = np.asarray([v for v in whole if v != 0], dtype=float)
        first, second = rng.integers(len(nonzero)), rng.integers(len(nonzero) - 1)
        second += second >= first  # any value but the first's
        V = nonzero[np.concatenate([[first, second], rng.integers(len(nonzero), size=n - 2)])][:, None]  # (n, 1)
        given = {"Q": UNIT[d_k] * Q_whole, "K": K, "V": V}
    else:
        rows, E_all = _token_scores(level)
        pool, which, pairs = _weight_pairs()
        pair = rng.integers(len(pairs))
        first, second = pairs[pair]  # W_Q (in units of c) and W_K
        chosen = _tokens(rng, E_all[which[pair]])
        if chosen is None:
            return None
        X = np.array(rows[chosen])  # (n, d): distinct nonzero rows
        values = _matrices(d, d_v)  # W_V's pool
        V_all = X @ values  # (4, n, d_v): V for every W_V
        # no zero value row, and the first two differ (as at levels 1 and 2)
        moving = np.flatnonzero((V_all != 0).any(axis=2).all(axis=1) & (V_all[:, 0] != V_all[:, 1]).any(axis=1))
        if not (X != 0).any(axis=0).all() or not len(moving):
            return None
        W_V = values[moving[rng.integers(len(moving))]]
        W_Q, W_K = UNIT[d_k] * pool[first], np.array(pool[second])
        given = {"X": X, "W_Q": W_Q, "W_K": W_K, "W_V": W_V, "Q": X @ W_Q, "K": X @ W_K, "V": X @ W_V}
    tr = scaled_dot_product(given["Q"], given["K"], given["V"], causal=True)
    return {**given, "A": tr.A, "d_k": d_k, "causal": True}


_PLAIN_MEAN = {n: plain_mean_weights(n) for n in {size[0] for size in SIZES.values()}}


def _plain_mean(n: int) -> np.ndarray:
    return _PLAIN_MEAN[n]


@functools.cache
def _incoming(level: int) -> np.ndarray:
    """Every G_O of the level: (k, n, d_v) with whole, nonzero entries (no zero row or column), read-only."""
    n, _, d_v, _ = SIZES[level]
    nonzero = [float(v) for v in whole_values(level) if v != 0]
    grids = np.meshgrid(*([np.asarray(nonzero)] * (n * d_v)), indexing="ij")
    stack = np.stack([g.ravel() for g in grids], axis=1).reshape(-1, n, d_v)
    stack.setflags(write=False)
    return stack


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.allclose per candidate of two stacks (k, …): rtol 1e-5, atol 1e-8."""
    return (np.abs(a - b) <= 1e-8 + 1e-5 * np.abs(b)).reshape(len(a), -1).all(axis=1)


def admissible(fwd: dict, level: int, which: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """_tested's verdicts alone."""
    return _tested(fwd, level, which)[0]


def _tested(fwd: dict, level: int, which: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """(verdicts, the references of every G_O tested: chain_batch.backward's first value).

    For the G_O of the level (_incoming; `which` of them, else all) with the forward pass `fwd`, the
    tests generate puts it to, each (k,) booleans (True: refused for that reason): a symmetric G_A
    (G_O Vᵀ and V G_Oᵀ alike), the plain mean's G_V, some step passing nothing back, over the time
    budget, a guarded mistake not apart (chain_batch.clashes: misconceptions.collides' question)."""
    n = SIZES[level][0]
    names = PARTS + (PROJECTION_PARTS if level == 3 else [])
    G_O = _incoming(level) if which is None else _incoming(level)[which]
    ref, alt = chain_batch.backward(fwd, G_O, level == 3)

    def alive(M: np.ndarray) -> np.ndarray:
        return np.abs(M).max(axis=-1) > 1e-12  # (k, rows)
    teaches = alive(ref["G_scaled"])[:, 1:].all(axis=1) & alive(ref["G_Q"]).any(axis=1) & alive(ref["G_K"]).any(axis=1)
    if level == 3:
        for g, w in (("G_Q", "W_Q"), ("G_K", "W_K"), ("G_V", "W_V")):
            teaches &= alive(ref[g] @ fwd[w].T).any(axis=1)
    limit = budget.BUDGET_MINUTES[level] + 1e-9
    # level 3 always fits (tests/test_kinds_backward_redraw.py), and so does every G_O of a forward pass whose
    # bound over all of them fits (chain_batch.bound_seconds: level 1 always, level 2 about 4 in 10)
    fits = level == 3 or chain_batch.bound_seconds(fwd, names, G_O.shape[2]) / 60.0 <= limit
    over = np.zeros(len(G_O), dtype=bool) if fits else chain_batch.seconds(fwd, ref, names) / 60.0 > limit
    return {"symmetric": _close(ref["G_A"], np.swapaxes(ref["G_A"], 1, 2)),
            "plain_mean": _close(_plain_mean(n).T @ G_O, ref["G_V"]),
            "mute": ~teaches, "over_budget": over,
            "clash": chain_batch.clashes(ref, alt, names, chain_batch.gap(spec(level).decimals))}, ref


CHUNK = 6  # G_O tested at once, in a random order: the first that passes is drawn uniformly from those that do
MAX_CHUNKS = 1  # then a new forward pass: one whose every G_O fails (a mistake alike whatever G_O is: 1 in 10 at
# level 3) costs one chunk; a forward pass where most pass hardly ever fails six


def _first_admissible(fwd: dict, level: int, order: np.ndarray) -> tuple[int, dict] | None:
    """The first G_O in `order` that passes every test of admissible(), tested a few at a time, with its
    references ({part: value}, chain_batch.backward's), or None."""
    return chain_batch.first_admissible(lambda which: _tested(fwd, level, which), order, CHUNK, MAX_CHUNKS)


def references(given: dict, gradients: dict) -> dict:
    """pipeline.run(given) from the backward pass already worked out (`gradients`: chain_batch.backward's
    references of G_O) and the forward steps the pipeline computes from what is given (S = Q Kᵀ, S / √d_k,
    the mask, A V, G_V W_Vᵀ: its own operations on the same values; A is given), bit for bit the same (tested)."""
    S = ops.scores(given["Q"], given["K"])
    scaled = ops.scale(S, int(given["d_k"]))
    env = {**given, "scores": S, "scaled": scaled, "masked": ops.apply_mask(scaled, True),
           "O": ops.weighted_sum(given["A"], given["V"]), **gradients}
    for name in ("G_scaled", "G_scores"):  # the hidden keys' cells as the mask's backward step writes them: +0.0
        if name in gradients:
            env[name] = ops.apply_mask_backward(gradients[name], True)
    if "X" in given:
        env["G_X_V"] = gradients["G_V"] @ given["W_V"].T  # the value path's share, a step of its own
    return env


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A forward pass drawn from admissible pieces (_forward), then G_O drawn from the level's incoming
    gradients that pass every test (admissible): the engine's redraw test is answered for all of them
    at once, so the draft it gets is the one it keeps."""
    s = spec(level)
    n, d_k, d_v, _ = SIZES[level]
    names = PARTS + (PROJECTION_PARTS if level == 3 else [])
    for _ in range(MAX_DRAWS):
        fwd = _forward(rng, level)
        if fwd is None:
            continue
        found = _first_admissible(fwd, level, rng.permutation(len(_incoming(level))))
        if found is None:
            continue
        chosen, gradients = found
        given = {**fwd, "G_O": np.array(_incoming(level)[chosen])}
        env = references(given, gradients)
        parts = reference_parts(given, names, s.decimals, env)
        # the engine's redraw question, answered above for every G_O (tests/test_kinds_backprop_constructive.py
        # holds it to misconceptions.collisions on the exercises): it is not asked again
        return Draft(given=given, parts=parts, params={"n": n, "d_k": d_k, "d_v": d_v}, env=env,
                     memo={("collides", GUARDS): False})
    raise RuntimeError(f"backprop: no forward pass with simple-fraction weights in {MAX_DRAWS} draws")


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
    loss = loss_for(np.asarray(v["G_O"]), from_x)
    return B.assemble(ex, before, [B.check(ex, loss, loss_latex, point, name,
                                           _check_cell(loss, point, name, np.asarray(v[part]), B), part, extra)])


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


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"G_O \to G_X")
