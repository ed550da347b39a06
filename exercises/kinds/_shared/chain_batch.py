"""The backward pass of causal attention for a stack of incoming gradients at once (backprop, backprop_loss).

With the forward pass fixed, every gradient and every guarded mistake's value is linear in G_O, so a
kind can work them out for all of its admissible G_O at once (a few batched products), keep the
candidates whose mistakes stay apart (misconceptions.clash_by_part's rule, candidate by candidate),
that teach every step and fit the time budget (budget.count's rules), and draw one of them: a draft
is accepted about once, instead of drawn, built and refused.

    G_A = G_O Vᵀ,  G_V = Aᵀ G_O,  G_Z = A ⊙ (G_A − rowsum(A ⊙ G_A)),  G_S = G_Z / √d_k,
    G_Q = G_S K,  G_K = G_Sᵀ Q  [,  G_W_* = Xᵀ G_*,  G_X = G_Q W_Qᵀ + G_K W_Kᵀ + G_V W_Vᵀ]

Each mistake is the step registry's expression (exercises.core.steps: G_A_MISTAKES … G_X_MISTAKES) carried
down the chain as the pipeline carries it; tests/test_kinds_backprop_constructive.py holds every decision
to misconceptions.collisions and budget.count on the exercises themselves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ...core import budget, misconceptions
from ...core.numbers import round_half_up

# the guarded mistakes, in the order their values are stacked per part
SOFTMAX_MISTAKES = ("softmax_grad_missing_term", "softmax_grad_diagonal_only", "softmax_grad_sign")
SCALE_MISTAKES = ("grad_scores_no_scale", "grad_scores_times_sqrt_dk")
# the mistakes reaching G_scores: one made at G_A, three at the softmax, two at the scaling
SCORE_IDS = ("grad_a_transposed", *SOFTMAX_MISTAKES, *SCALE_MISTAKES)
PATH_MISTAKES = (("grad_x_no_value_path", "QK"), ("grad_x_no_key_path", "QV"), ("grad_x_no_query_path", "KV"),
                 ("grad_x_query_path_only", "Q"), ("grad_x_key_path_only", "K"), ("grad_x_value_path_only", "V"))


def gap(decimals: int) -> float:
    """misconceptions.separation of a part graded to `decimals` places, or exactly (whole references):
    the same either way for decimals >= 2."""
    tolerance = 0.51 * 10.0 ** (-decimals)
    return max(tolerance, misconceptions.DIAGNOSIS_TOLERANCE) + misconceptions.ROUNDING


def _t(M: np.ndarray) -> np.ndarray:
    return np.swapaxes(M, -1, -2)


def backward(fwd: Mapping[str, np.ndarray], G_O: np.ndarray, projections: bool) -> tuple[dict, dict]:
    """({part: (k, …) references}, {part: (k, m, …) guarded mistakes' values}) for the stack G_O (k, n, d_v).
    `fwd`: A, V, Q, K, d_k (and X, W_Q, W_K, W_V with `projections`)."""
    A, V, Q, K = fwd["A"], fwd["V"], fwd["Q"], fwd["K"]
    root = math.sqrt(int(fwd["d_k"]))
    G_A = G_O @ V.T  # (k, n, n)
    G_V = A.T @ G_O  # (k, n, d_v)
    G_Z = A * (G_A - np.sum(A * G_A, axis=-1, keepdims=True))  # (k, n, n); 0 where the mask hides a key
    G_S = G_Z / root
    G_Q, G_K = G_S @ K, _t(G_S) @ Q  # (k, n, d_k) each
    ref = {"G_O": G_O, "G_A": G_A, "G_V": G_V, "G_scaled": G_Z, "G_scores": G_S, "G_Q": G_Q, "G_K": G_K}
    # the mistakes, stacked on axis 1
    a_t = V @ _t(G_O)  # grad_a_transposed: V G_Oᵀ (k, n, n)
    v_nt = A @ G_O  # grad_v_no_transpose: A G_O (k, n, d_v)
    z_of_a_t = A * (a_t - np.sum(A * a_t, axis=-1, keepdims=True))
    row = np.sum(A * G_A, axis=-1, keepdims=True)
    Z_alt = np.stack([z_of_a_t, A * G_A, A * (1 - A) * G_A, A * (row - G_A)], axis=1)  # (k, 4, n, n)
    times = G_Z * np.sqrt(int(fwd["d_k"]))  # grad_scores_times_sqrt_dk, as the registry computes it
    S_alt = np.concatenate([Z_alt / root, G_Z[:, None], times[:, None]], axis=1)  # (k, 6, n, n)
    Q_alt = np.concatenate([S_alt @ K, (_t(G_S) @ K)[:, None]], axis=1)  # (k, 7, n, d_k): + grad_q_transposed
    K_alt = np.concatenate([_t(S_alt) @ Q, (G_S @ Q)[:, None]], axis=1)  # (k, 7, n, d_k): + grad_k_no_transpose
    alt = {"G_A": a_t[:, None], "G_V": v_nt[:, None], "G_scaled": Z_alt, "G_scores": S_alt, "G_Q": Q_alt,
           "G_K": K_alt}
    if not projections:
        return ref, alt
    X, W_Q, W_K, W_V = fwd["X"], fwd["W_Q"], fwd["W_K"], fwd["W_V"]
    path = {"Q": G_Q @ W_Q.T, "K": G_K @ W_K.T, "V": G_V @ W_V.T}  # (k, n, d) each
    ref.update(G_W_Q=X.T @ G_Q, G_W_K=X.T @ G_K, G_W_V=X.T @ G_V, G_X=path["Q"] + path["K"] + path["V"])
    # G_X of the six mistakes reaching G_scores (both G_Q and G_K change), q_transposed (G_Q), k_no_transpose (G_K),
    # v_no_transpose (G_V), and the six sums over some paths only
    score_x = S_alt @ K @ W_Q.T + _t(S_alt) @ Q @ W_K.T + path["V"][:, None]  # (k, 6, n, d)
    x_alt = [score_x,
             (Q_alt[:, 6] @ W_Q.T + path["K"] + path["V"])[:, None],
             (path["Q"] + K_alt[:, 6] @ W_K.T + path["V"])[:, None],
             (path["Q"] + path["K"] + v_nt @ W_V.T)[:, None]]
    x_alt += [sum(path[m] for m in kept)[:, None] for _, kept in PATH_MISTAKES]
    alt.update(G_W_Q=X.T @ Q_alt, G_W_K=X.T @ K_alt, G_W_V=(X.T @ v_nt)[:, None], G_X=np.concatenate(x_alt, axis=1))
    return ref, alt


def mistake_ids(projections: bool) -> dict[str, tuple[str, ...]]:
    """{part: the ids of the values backward() stacks for it, in order}."""
    ids = {"G_A": ("grad_a_transposed",), "G_V": ("grad_v_no_transpose",),
           "G_scaled": ("grad_a_transposed", *SOFTMAX_MISTAKES), "G_scores": SCORE_IDS,
           "G_Q": (*SCORE_IDS, "grad_q_transposed"), "G_K": (*SCORE_IDS, "grad_k_no_transpose")}
    if projections:
        ids.update(G_W_Q=ids["G_Q"], G_W_K=ids["G_K"], G_W_V=("grad_v_no_transpose",),
                   G_X=(*SCORE_IDS, "grad_q_transposed", "grad_k_no_transpose", "grad_v_no_transpose",
                        *(mid for mid, _ in PATH_MISTAKES)))
    return ids


FAR = 1e6  # the rows a part does not fill: FAR · their row apart from everything (never within a separation)


def clashes(ref: Mapping[str, np.ndarray], alt: Mapping[str, np.ndarray], names, separation: float) -> np.ndarray:
    """Per candidate (k,): some part's mistake within `separation` of the part's reference in every cell, or
    of another mistake's (misconceptions.clash_by_part's rule; every value here is finite). Every part is
    tested at once: its answer and mistakes are the rows of one slice of a block padded to the widest
    part; the pairs alike in its first cell (few) are compared in the others."""
    names = list(names)
    k = len(ref[names[0]])
    rows = 1 + max(alt[name].shape[1] for name in names)
    width = max(ref[name][0].size for name in names)
    block = np.empty((width, k, len(names), rows))  # cell, candidate, part, row (0: the answer)
    block[:] = FAR * np.arange(rows)
    for p, name in enumerate(names):
        m, cells = alt[name].shape[1], ref[name][0].size
        # the cells last to first: a causal part's first cells (row 1, the hidden keys) are 0 in every row
        block[:cells, :, p, 0] = ref[name].reshape(k, cells)[:, ::-1].T
        block[:cells, :, p, 1:1 + m] = alt[name].reshape(k, m, cells)[:, :, ::-1].transpose(2, 0, 1)
        block[cells:, :, p, :1 + m] = 0.0  # the padding: alike in the rows the part fills
    first = block[0]  # (k, parts, rows)
    near = (np.abs(first[:, :, :, None] - first[:, :, None, :]) <= separation) & ~np.eye(rows, dtype=bool)
    c, p, i, j = np.nonzero(near)  # the pairs alike in the first cell: the rest of their cells at once
    alike = (np.abs(block[1:, c, p, i] - block[1:, c, p, j]) <= separation).all(axis=0)  # (pairs,)
    found = np.zeros(k, dtype=bool)
    found[c[alike]] = True
    return found


def _factors(M: np.ndarray) -> np.ndarray:
    """budget._factors, stacked: [nonzero, nonzero and not ±1] per cell, (2, …) booleans."""
    size = np.abs(M)
    nonzero = size > 1e-12  # every value here is finite
    return np.stack([nonzero, nonzero & (np.abs(size - 1.0) >= 1e-12)])


def seconds(fwd: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray], names) -> np.ndarray:
    """Per candidate: budget.count(given, names, env).seconds of the backward steps from G_O to `names`
    (those of them that are steps, every one asked and written: G_O's cells too when it is among them),
    at budget.RATES. A product left @ right has Σ_m (nonzero left ·m)(nonzero right m·) terms, as many
    hard ones counted alike (budget.product_operations); the gradients' factors are found at once (one
    block of every cell read), the forward pass's in plain Python (budget.factor_counts), nonzero and hard side
    by side (axis 0) so each product is two numpy calls."""
    names = set(names)
    k = len(ref["G_A"])
    used = ["G_O", "G_A"]
    if "G_scores" in names or "G_scaled" in names:
        used.append("G_scaled")
    if "G_Q" in names or "G_K" in names:
        used.append("G_scores")
    if "G_X" in names:
        used += ["G_Q", "G_K", "G_V"]
    block = _factors(np.concatenate([ref[g].reshape(k, -1) for g in used], axis=1))  # (2, k, cells)
    view, start = {}, 0
    for g in used:
        shape = ref[g].shape[1:]
        size = math.prod(shape)
        view[g] = block[:, :, start:start + size].reshape(2, k, *shape)
        start += size
    total = np.zeros((2, k))  # terms, hard terms

    def counts(M: np.ndarray, axis: int) -> np.ndarray:
        return np.array(budget.factor_counts(M, axis), dtype=float)[:, :, None]  # (2, lines, 1)

    def grad_left(g: str, right: np.ndarray) -> None:  # ref[g] @ right: g's columns against right's rows
        nonlocal total
        total = total + (view[g].sum(axis=2) @ counts(right, 1))[..., 0]

    def grad_right(left: np.ndarray, g: str) -> None:  # left @ ref[g]: left's columns against g's rows
        nonlocal total
        total = total + (view[g].sum(axis=3) @ counts(left, 0))[..., 0]

    grad_left("G_O", fwd["V"].T)  # G_A
    grad_right(fwd["A"].T, "G_O")  # G_V
    extra_mult = extra_add = 0.0
    divisions = 0.0
    if "G_scaled" in names:
        A = _factors(fwd["A"])  # (2, n, n)
        weights = float(A[0].sum())
        scaled = (A[:, None] & view["G_A"]).sum(axis=(2, 3))  # (2, k): A ⊙ G_A's terms
        extra_mult = scaled[1] + weights
        extra_add = scaled[0] - scaled[1] + weights
    if "G_scores" in names and int(fwd["d_k"]) != 1:
        divisions = view["G_scaled"][0].sum(axis=(1, 2))
    if "G_Q" in names:
        grad_left("G_scores", fwd["K"])
    if "G_K" in names:  # G_scoresᵀ Q: G_scores' rows against Q's rows
        total = total + (view["G_scores"].sum(axis=3) @ counts(fwd["Q"], 1))[..., 0]
    if "G_X" in names:
        X = fwd["X"]
        for g in ("G_Q", "G_K", "G_V"):
            grad_right(X.T, g)  # G_W_*
        for g, w in (("G_Q", "W_Q"), ("G_K", "W_K"), ("G_V", "W_V")):
            grad_left(g, fwd[w].T)
        extra_add = extra_add + 2 * ref["G_X"][0].size
    mult = total[1] + extra_mult
    add = total[0] - total[1] + extra_add
    cells = sum(ref[name][0].size for name in names)
    r = budget.RATES
    return (r["multiply_adds"] * mult + r["divisions"] * divisions + r["additions"] * add
            + r["cells"] * cells)


def careful(fwd: Mapping[str, np.ndarray], G_O: np.ndarray, names, places: int) -> dict[str, np.ndarray]:
    """{part: (k, …)}: what a careful student writes under "round what you write, then compute" for the
    stack G_O (k, n, d_v), G_O itself given exactly: every step from the values before it as rounded to
    `places` (decimal half up), as pipeline.run(given, rounding=places) computes it."""
    def round_half_up(values: np.ndarray, places: int) -> np.ndarray:
        return _round(values, places)

    A, V = fwd["A"], fwd["V"]
    out = {"G_O": round_half_up(G_O, places)}
    out["G_A"] = round_half_up(out["G_O"] @ V.T, places)
    out["G_V"] = round_half_up(A.T @ out["G_O"], places)
    if "G_scaled" not in names:
        return out
    G_A = out["G_A"]
    out["G_scaled"] = round_half_up(A * (G_A - np.sum(A * G_A, axis=-1, keepdims=True)), places)
    out["G_scores"] = round_half_up(out["G_scaled"] / math.sqrt(int(fwd["d_k"])), places)
    if "G_Q" not in names:
        return out
    G_S = out["G_scores"]
    out["G_Q"], out["G_K"] = round_half_up(G_S @ fwd["K"], places), round_half_up(_t(G_S) @ fwd["Q"], places)
    X = fwd["X"]
    for g in ("Q", "K", "V"):
        out[f"G_W_{g}"] = round_half_up(X.T @ out[f"G_{g}"], places)
    out["G_X"] = round_half_up(out["G_Q"] @ fwd["W_Q"].T + out["G_K"] @ fwd["W_K"].T + out["G_V"] @ fwd["W_V"].T,
                               places)
    return out


def _round(values: np.ndarray, places: int) -> np.ndarray:
    """numbers.round_half_up of finite values (these are): the same float per cell, numpy's arithmetic for
    every cell not on (or a float's breadth from) a half, numbers.round_half_up's decimal rule if one is."""
    scale = 10.0 ** places
    scaled = values * scale
    # away from a half (no |scaled| within 1e-6 of a whole number and a half), rounding half up and rounding
    # to even agree: numpy's nearest whole number is sign · ⌊|scaled| + ½⌋, the same float (the distances
    # below are exact: Sterbenz)
    nearest = np.rint(scaled)
    if (np.abs(np.abs(scaled - nearest) - 0.5) < 1e-6).any():
        return round_half_up(values, places)
    return nearest / scale + 0.0


def near(values: Mapping[str, np.ndarray], alt: Mapping[str, np.ndarray], names, separation: float) -> np.ndarray:
    """Per candidate (k,): some part's mistake within `separation` of `values` (k, …) in every cell of it
    (the rounding check's question: _shared/apart.apart_from_rounded refuses such a variant)."""
    found = None
    for name in names:
        V = values[name].reshape(len(values[name]), 1, -1)  # (k, 1, cells)
        M = alt[name].reshape(*alt[name].shape[:2], -1)  # (k, m, cells)
        hit = (np.abs(M - V).max(axis=-1) <= separation).any(axis=1)
        found = hit if found is None else found | hit
    return found


def first_admissible(tested, order: np.ndarray, chunk: int, chunks: int) -> tuple[int, dict] | None:
    """The first candidate in `order` that no test refuses, tested `chunk` at a time for at most `chunks`
    chunks, with its values, or None. `tested(which)` gives ({test: (len(which),) bool, True where refused},
    {name: (len(which), ...) stacked values}); the values of the candidate found are handed back, one each."""
    for start in range(0, min(len(order), chunk * chunks), chunk):
        which = order[start:start + chunk]
        refusals, values = tested(which)
        passing = np.flatnonzero(~np.logical_or.reduce(list(refusals.values())))
        if len(passing):
            k = passing[0]
            return int(which[k]), {name: M[k] for name, M in values.items()}
    return None


def bound_seconds(fwd: Mapping[str, np.ndarray], names, n_v: int) -> float:
    """An upper bound of seconds(fwd, ref, names) over every incoming gradient: the same count with every
    cell of every gradient nonzero and not ±1, save G_scaled's (and G_scores') cells where A is 0 or where
    A's row weighs one key alone (its weight is 1: A ⊙ (G_A − rowsum(A ⊙ G_A)) is 0 there exactly). The
    count only grows with more nonzero or hard factors (a multiply-add costs more than an addition), so
    a forward pass whose bound fits fits with every G_O. `n_v`: d_v, G_O's width. Plain Python."""
    names = set(names)
    A = fwd["A"]
    n = A.shape[0]
    a_nz, a_hard = budget.factor_counts(A, 1)  # per row of A
    A_rows = A.tolist()
    # G_scaled's nonzero pattern at most: A's nonzero cells of the rows with two or more
    alone = [a_nz[i] == 1 and max(abs(x) for x in row) == 1.0 for i, row in enumerate(A_rows)]
    s_rows = [[abs(x) > 1e-12 and not alone[i] for x in row] for i, row in enumerate(A_rows)]
    s_row = [sum(r) for r in s_rows]
    s_col = [sum(r[j] for r in s_rows) for j in range(n)]
    mult = add = divisions = 0

    def product(terms: int, hard: int) -> None:
        nonlocal mult, add
        mult += hard
        add += terms - hard

    v_nz, v_hard = budget.factor_counts(fwd["V"], 0)  # per column of V: the rows of Vᵀ
    product(n * sum(v_nz), n * sum(v_hard))  # G_A = G_O Vᵀ: every G_O cell hard
    product(sum(a_nz) * n_v, sum(a_hard) * n_v)  # G_V = Aᵀ G_O: Aᵀ's columns are A's rows
    if "G_scaled" in names:
        weights = sum(a_nz)
        mult += sum(a_hard) + weights
        add += sum(a_nz) - sum(a_hard) + weights
    if "G_scores" in names and int(fwd["d_k"]) != 1:
        divisions += sum(s_row)
    if "G_Q" in names:  # G_scores K: G_scores' columns against K's rows
        k_nz, k_hard = budget.factor_counts(fwd["K"], 1)
        product(sum(c * t for c, t in zip(s_col, k_nz)), sum(c * h for c, h in zip(s_col, k_hard)))
    if "G_K" in names:  # G_scoresᵀ Q: G_scores' rows against Q's rows
        q_nz, q_hard = budget.factor_counts(fwd["Q"], 1)
        product(sum(r * t for r, t in zip(s_row, q_nz)), sum(r * h for r, h in zip(s_row, q_hard)))
    if "G_X" in names:
        x_nz, x_hard = budget.factor_counts(fwd["X"], 1)  # Xᵀ's columns are X's rows
        d_k = fwd["K"].shape[1]
        for width in (d_k, d_k, n_v):  # Xᵀ G_Q, Xᵀ G_K, Xᵀ G_V
            product(sum(x_nz) * width, sum(x_hard) * width)
        for w in ("W_Q", "W_K", "W_V"):  # G_* W_*ᵀ: W_*ᵀ's rows are W_*'s columns
            w_nz, w_hard = budget.factor_counts(fwd[w], 0)
            product(n * sum(w_nz), n * sum(w_hard))
        add += 2 * n * fwd["X"].shape[1]
    sizes = {"G_O": n * n_v, "G_A": n * n, "G_V": n * n_v, "G_scaled": n * n, "G_scores": n * n}
    if "X" in fwd:
        d, d_k = fwd["X"].shape[1], fwd["K"].shape[1]
        sizes.update(G_Q=n * d_k, G_K=n * d_k, G_W_Q=d * d_k, G_W_K=d * d_k, G_W_V=d * n_v, G_X=n * d)
    else:
        d_k = fwd["K"].shape[1]
        sizes.update(G_Q=n * d_k, G_K=n * d_k)
    cells = sum(sizes[name] for name in names)
    r = budget.RATES
    return r["multiply_adds"] * mult + r["divisions"] * divisions + r["additions"] * add + r["cells"] * cells


def product_seconds(left: np.ndarray, right: np.ndarray) -> float:
    """budget.product_operations(left, right).seconds of two small matrices, in plain Python."""
    l_nz, l_hard = budget.factor_counts(left, 0)  # per column of left
    r_nz, r_hard = budget.factor_counts(right, 1)  # per row of right
    terms = sum(a * b for a, b in zip(l_nz, r_nz, strict=True))
    hard = sum(a * b for a, b in zip(l_hard, r_hard, strict=True))
    return budget.RATES["multiply_adds"] * hard + budget.RATES["additions"] * (terms - hard)
