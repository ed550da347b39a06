"""cross_attention's redraw question in closed form (issue 14: a constructive generator).

Every guarded mistake of this kind changes the softmax's input or the softmax, and its value at the
parts `scaled`, `A` and `O` follows from S, d_k and V alone (and, at level 3, from the X-side
projections for cross_keys_from_queries, whose K, V, S and A are n_q rows: only its O has the shape
of a part). So both of the generator's checks are a few numpy operations on stacked values, for one
draft or for a whole table of (S, V) at once:

- `collides`: misconceptions.collides(ex, GUARDS): a mistake within the part's separation of the
  answer in every cell, or of another mistake;
- `apart`: _shared.apart.apart_from_rounded: every mistake apart from what a careful student writes
  (every value rounded half-up to 2 places as computed, the pipeline's `rounding=2`).

The values are the registry's own expressions (steps.SCALED_MISTAKES, MASKED_17_MISTAKES,
SOFTMAX_17_MISTAKES) on the same inputs, so the same floats; a mistake whose value is not finite
(no_exp over a row that sums to 0) is left out, as misconceptions leaves out what no one can write
(a −∞ such a value may hold instead is apart from every other value: the decisions are the same).
tests/test_kinds_cross_attention_constructive.py holds both to misconceptions and apart_from_rounded,
for every (S, V) of level 1 and for drafts of every level.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

import numpy as np

from attention_core import ops

from ...core import misconceptions
from ...core.numbers import round_half_up

CHECKED = ("scaled", "A", "O")  # the parts a guarded mistake reaches with the part's own shape
PLACES = 2  # the declared decimals of every variant (declared_decimals: 2 when every part is whole)
# the separation of every checked part: its decimals are 2 or 0, and both give DIAGNOSIS_TOLERANCE + ROUNDING
GAP = misconceptions.GAP
SCALED = ("no_scaling", "scaled_by_dk", "scaled_times_sqrt_dk")  # made at `scaled`
SOFTMAX = ("softmax_columns", "no_exp", "softmax_no_normalise")  # made at `A`


@functools.cache
def _hidden(n_q: int, n_k: int) -> np.ndarray:
    """The cells cross_causal_mask hides: key j from query i when j > i (read-only)."""
    cells = np.triu(np.ones((n_q, n_k), dtype=bool), k=1)
    cells.setflags(write=False)
    return cells


@functools.cache
def _off_diagonal(k: int) -> np.ndarray:
    cells = ~np.eye(k, dtype=bool)
    cells.setflags(write=False)
    return cells


def _scaled_mistakes(S: np.ndarray, d_k: int, guards) -> list[tuple[str, np.ndarray]]:
    """The scaled scores each mistake of `scaled` gives (steps.SCALED_MISTAKES' expressions and conditions)."""
    made = []
    if "no_scaling" in guards and d_k != 1:
        made.append(("no_scaling", np.array(S, dtype=float)))
    if "scaled_by_dk" in guards and d_k not in (0, 1):
        made.append(("scaled_by_dk", S / d_k))
    if "scaled_times_sqrt_dk" in guards and d_k not in (0, 1):
        made.append(("scaled_times_sqrt_dk", S * np.sqrt(d_k)))
    return made


def blocks(S: np.ndarray, d_k: int, V: np.ndarray, guards: Iterable[str], own_O: np.ndarray | None = None):
    """The references and every guarded mistake's values of the checked parts, for a batch.

    S (B, n_q, n_k) whole scores, V (B, n_k, d_v), `own_O` (B, n_q, d_v): O with keys and values from
    the queries' sequence (cross_keys_from_queries; None without a memory H). Returns
    ({part: reference (B, ...)}, {part: (ids, values (B, k, ...))}, careful {part: (B, ...)})."""
    guards = set(guards)
    n_q, n_k = S.shape[1:]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        Z = S / math.sqrt(d_k)  # ops.scale
        A = ops.softmax(Z, axis=-1)
        refs = {"scaled": Z, "A": A, "O": A @ V}
        scaled = _scaled_mistakes(S, d_k, guards)
        inputs = [value for _, value in scaled]  # their softmax input: the mask changes nothing
        ids_a = [mid for mid, _ in scaled]
        if "cross_causal_mask" in guards and n_q < n_k:  # _rectangle_without_mask (no causal mask, no padding)
            ids_a.append("cross_causal_mask")
            inputs.append(np.where(_hidden(n_q, n_k), -np.inf, Z))
        A_block = [ops.softmax(np.stack(inputs, axis=1), axis=-1)] if inputs else []  # (B, k, n_q, n_k)
        if "softmax_columns" in guards:
            ids_a.append("softmax_columns")
            A_block.append(ops.softmax(Z, axis=-2)[:, None])  # down each matrix's columns
        if "no_exp" in guards:
            ids_a.append("no_exp")
            A_block.append((Z / Z.sum(axis=-1, keepdims=True))[:, None])  # Z is finite: steps._no_exp
        if "softmax_no_normalise" in guards:
            ids_a.append("softmax_no_normalise")
            A_block.append(np.exp(Z)[:, None])
        A_stack = np.concatenate(A_block, axis=1)  # (B, k, n_q, n_k)
        O_stack = A_stack @ V[:, None]  # (B, k, n_q, d_v)
        ids_o = list(ids_a)
        if own_O is not None and "cross_keys_from_queries" in guards:
            ids_o.append("cross_keys_from_queries")
            O_stack = np.concatenate([O_stack, own_O[:, None]], axis=1)
        mistakes = {"A": (ids_a, A_stack), "O": (ids_o, O_stack)}
        if scaled:
            mistakes["scaled"] = ([mid for mid, _ in scaled], np.stack([v for _, v in scaled], axis=1))
        # the careful student: every value rounded to 2 places as it is computed (scores are whole)
        Z_r = round_half_up(Z, PLACES)
        A_r = round_half_up(ops.softmax(Z_r, axis=-1), PLACES)
        careful = {"scaled": Z_r, "A": A_r, "O": round_half_up(A_r @ V, PLACES)}
    return refs, mistakes, careful


def decide(refs: dict, mistakes: dict, careful: dict, gaps: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(collides (B,), apart (B,)): some mistake of a part within its gap of the reference in every cell
    or of another mistake; every mistake apart from the careful value (some cell beyond the gap)."""
    batch = len(next(iter(refs.values())))
    collides = np.zeros(batch, dtype=bool)
    apart = np.ones(batch, dtype=bool)
    with np.errstate(invalid="ignore"):
        for name, (ids, block) in mistakes.items():
            gap = GAP if gaps is None else gaps[name]
            flat = block.reshape(batch, len(ids), -1)  # (B, k, cells)
            writable = np.isfinite(flat).all(axis=-1)  # (B, k)
            like_ref = (np.abs(flat - refs[name].reshape(batch, 1, -1)).max(axis=-1) <= gap) & writable
            like_careful = (np.abs(flat - careful[name].reshape(batch, 1, -1)).max(axis=-1) <= gap) & writable
            pair = np.abs(flat[:, :, None] - flat[:, None, :]).max(axis=-1) <= gap  # (B, k, k)
            pair &= writable[:, :, None] & writable[:, None, :] & _off_diagonal(len(ids))
            collides |= like_ref.any(axis=1) | pair.any(axis=(1, 2))
            apart &= ~like_careful.any(axis=1)
    return collides, apart


def own_output(X: np.ndarray, Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray, d_k: int) -> np.ndarray:
    """O of cross_keys_from_queries: keys and values projected from X (the pipeline's walk with K = X W_K,
    V = X W_V: S = Q Kᵀ, S / √d_k, no mask, the row softmax, A V)."""
    A = ops.softmax((Q @ (X @ W_K).T) / math.sqrt(d_k), axis=-1)
    return A @ (X @ W_V)


def check(env: dict, guards: Iterable[str], parts: dict | None = None) -> tuple[bool, bool]:
    """(collides, apart) of one variant from its pipeline values `env` (pipeline.run(given)), as `decide`
    on `blocks` would say, in a few numpy operations: every value of the three parts (the reference and
    each mistake, flattened, a short O padded with zeros) in one table, all pairs' largest cell difference
    at once; what the pairs mean per part is read from masks made once per layout. `parts`: the Parts
    by name (their separations; GAP when not given, the separation of every part of this kind).

    The careful values are rounded only when a mistake is near the reference: they are within `_drift`
    of it, so a mistake farther than gap + _drift from the reference in some cell is apart from them.
    With a clash the careful values are not looked at: (True, True), the variant is refused anyway."""
    guards = set(guards)
    if parts is not None and any(misconceptions.separation(parts[name]) != GAP for name in CHECKED):
        return _check_by_blocks(env, guards, parts)
    S, V, d_k = env["scores"], env["V"], int(env["d_k"])
    n_q, n_k = S.shape
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        Z = S / math.sqrt(d_k)  # ops.scale
        scaled = [value for _, value in _scaled_mistakes(S, d_k, guards)]
        inputs = [Z, *scaled]
        if "cross_causal_mask" in guards and n_q < n_k:
            inputs.append(np.where(_hidden(n_q, n_k), -np.inf, Z))
        A_rows = [ops.softmax(np.stack(inputs), axis=-1)]  # the reference's A first, then the mistakes'
        if "softmax_columns" in guards:
            A_rows.append(ops.softmax(Z, axis=0)[None])
        if "no_exp" in guards:
            A_rows.append((Z / Z.sum(axis=1, keepdims=True))[None])
        if "softmax_no_normalise" in guards:
            A_rows.append(np.exp(Z)[None])
        A_all = np.concatenate(A_rows) if len(A_rows) > 1 else A_rows[0]
        O_all = A_all @ V  # (k, n_q, d_v)
        own = "H" in env and "cross_keys_from_queries" in guards
        layout = (len(scaled), len(A_all) - 1, len(A_all) - 1 + own)
        table = np.zeros((3 + sum(layout), n_q * n_k))  # rows: Z, its mistakes, A, its mistakes, O, its mistakes
        table[:1 + layout[0]] = np.stack([Z, *scaled]).reshape(1 + layout[0], -1)
        start = 1 + layout[0]
        table[start:start + len(A_all)] = A_all.reshape(len(A_all), -1)
        start += len(A_all)
        width = O_all[0].size
        table[start:start + len(O_all), :width] = O_all.reshape(len(O_all), -1)
        if own:
            table[-1, :width] = own_output(env["X"], env["Q"], env["W_K"], env["W_V"], d_k).reshape(-1)
        widest = np.abs(table[:, None] - table[None]).max(axis=-1)  # (r, r); NaN and ∞ are never close
    clash, mistakes, references, owners = _masks(layout)
    if (widest[clash] <= GAP).any():
        return True, True
    if not (widest[mistakes, references] <= GAP + _drift(V)[owners]).any():
        return False, True  # every mistake farther from the reference than the careful values can be
    with np.errstate(invalid="ignore"):
        far = np.abs(table[mistakes] - _careful(Z, V)[owners]).max(axis=-1)
    return False, not bool((far <= GAP).any())


def _drift(V: np.ndarray) -> np.ndarray:
    """How far the careful values can lie from the reference, per checked part (scaled, A, O), in any
    cell: 0.005 from rounding Z; the softmax moves by at most ½ of its input's change (its Jacobian's rows
    sum to at most 2a(1 − a) in absolute value), so A by 0.005 · ½ + 0.005; O = A_r V by that times the
    largest column sum of |V|, + 0.005. A margin of 1e-9 for the floats' own error."""
    to_a = 0.005 * 0.5 + 0.005
    return np.array([0.005, to_a, to_a * float(np.abs(V).sum(axis=0).max()) + 0.005]) + 1e-9


@functools.cache
def _masks(layout: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For check's table of one layout (how many mistakes reach scaled, A and O): the pairs a clash is
    looked for in ((r, r): a mistake and its part's reference, two mistakes of one part, each pair once),
    and per mistake its row, its part's reference row and its part (0 scaled, 1 A, 2 O)."""
    rows = 3 + sum(layout)
    clash = np.zeros((rows, rows), dtype=bool)
    mistakes, references, owners = [], [], []
    start = 0
    for part, k in enumerate(layout):
        first, last = start + 1, start + 1 + k
        clash[start, first:last] = True
        clash[first:last, first:last] = np.triu(np.ones((k, k), dtype=bool), k=1)
        mistakes += range(first, last)
        references += [start] * k
        owners += [part] * k
        start = last
    out = (clash, np.array(mistakes, dtype=int), np.array(references, dtype=int), np.array(owners, dtype=int))
    for array in out:
        array.setflags(write=False)
    return out


def _careful(Z: np.ndarray, V: np.ndarray) -> np.ndarray:
    """(3, n_q·n_k): what a careful student writes for scaled, A and O (pipeline.run(given, rounding=2):
    every value rounded half-up as it is computed; the scores are whole), O padded with zeros."""
    Z_r = round_half_up(Z, PLACES)
    A_r = round_half_up(ops.softmax(Z_r, axis=-1), PLACES)
    O_r = round_half_up(A_r @ V, PLACES)
    out = np.zeros((3, Z.size))
    out[0], out[1], out[2, :O_r.size] = Z_r.reshape(-1), A_r.reshape(-1), O_r.reshape(-1)
    return out


def _check_by_blocks(env: dict, guards, parts: dict | None) -> tuple[bool, bool]:
    """check() through blocks and decide (the rule it is held to)."""
    S, V = env["scores"][None], env["V"][None]
    own = None
    if "H" in env:
        own = own_output(env["X"], env["Q"], env["W_K"], env["W_V"], int(env["d_k"]))[None]
    refs, mistakes, careful = blocks(S, int(env["d_k"]), V, guards, own)
    gaps = None if parts is None else {name: misconceptions.separation(parts[name]) for name in mistakes}
    collides, apart = decide(refs, mistakes, careful, gaps)
    return bool(collides[0]), bool(apart[0])
