"""What a hand solution does, by kind of operation, and the rules that count one step of it (DESIGN §6).

Each step record carries its rule (AttentionStep.count); exercises.core.budget walks the records and turns
the counts into minutes.

    a product cell               per term x·y: nothing when a factor is 0, one addition when a factor
                                 is ±1 (the other factor is added or subtracted), else one multiply-add;
                                 a product by the identity is read off (nothing)
    a division by √d_k           one division per nonzero cell (none when d_k = 1), √d_k read off the
                                 aid once when it is not whole
    a softmax row                one exponential per finite, nonzero exponent (e⁰ = 1 and −∞ → 0
                                 need no table), the additions of its sum and the sum written, one
                                 division per weight (none for a row with a single visible key)
    a softmax-gradient row       r_i = Σ_k a_ik g_ik (terms as above) written, then a_ij (g_ij − r_i):
                                 one addition and one multiply-add per weight that is not 0
    G_X                          its three products (each written) and the two additions per cell that
                                 join them

Each operation also counts the digits its operands carry beyond one (`digits`: a number done in the head
has one): a multiply-add or a division digits(x)·digits(y) − 1 single-digit products more, an addition
digits − 1 columns more, a written cell digits − 1 digits more. RATES prices both, in this one place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

# seconds per operation, by hand with the formula sheet and the aids (an exponential: looked up in the eˣ
# table and written; a lookup: any other value read off an aid, cos/sin or a √ that is not whole), for
# operands done in the head (a whole number up to 10, a half up to 3); per digit beyond that (`digits`):
# a product or a division does one more single-digit product per pair of its operands' digits (0.73 · 1.41:
# 2 · 3 = 6, five more than 2 · 3), an addition one more column, a written cell one more digit
RATES: dict[str, float] = {"multiply_adds": 10.0, "divisions": 10.0, "additions": 3.0, "exponentials": 20.0,
                           "lookups": 10.0, "cells": 5.0, "product_digits": 5.0, "division_digits": 0.5,
                           "sum_digits": 1.0, "written_digits": 2.0}


@dataclass(frozen=True)
class Operations:
    """What a hand solution does, by kind of operation."""

    multiply_adds: int = 0
    additions: int = 0
    exponentials: int = 0
    divisions: int = 0
    cells: int = 0
    lookups: int = 0  # a value read off an aid other than the eˣ table: cos/sin, √d_k
    product_digits: int = 0  # single-digit products beyond one per multiply-add (digits(x)·digits(y) − 1)
    division_digits: int = 0  # the same per division (digits(divisor)·digits(quotient) − 1)
    sum_digits: int = 0  # columns beyond one per addition
    written_digits: int = 0  # digits beyond one per cell written

    def __add__(self, other: Operations) -> Operations:
        return Operations(*[getattr(self, name) + getattr(other, name) for name in _NAMES])

    @property
    def seconds(self) -> float:
        return sum(RATES[f.name] * getattr(self, f.name) for f in fields(self))

    @property
    def minutes(self) -> float:
        return self.seconds / 60.0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_NAMES = tuple(f.name for f in fields(Operations))
NONE = Operations()


def _nonzero(M: Any) -> np.ndarray:
    M = np.asarray(M, dtype=float)
    return np.isfinite(M) & (np.abs(M) > 1e-12)


def _factors(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cell of M: nonzero, and nonzero and not ±1."""
    nonzero = _nonzero(M)
    return nonzero, nonzero & ~_unit(M)


def _unit(M: Any) -> np.ndarray:
    return np.abs(np.abs(np.asarray(M, dtype=float)) - 1.0) < 1e-12


def _digits_of(hundredths: np.ndarray) -> np.ndarray:
    """The digits of values held as whole hundredths (≥ 0): 1 for a number done in the head, else the
    significant digits (trailing zeros carry no work)."""
    head = ((hundredths % 100 == 0) & (hundredths <= 1000)) | ((hundredths % 50 == 0) & (hundredths <= 300))
    significant = hundredths
    while np.any(stripped := (significant % 10 == 0) & (significant > 0)):
        significant = np.where(stripped, significant // 10, significant)
    return np.where(head, 1, np.floor(np.log10(np.maximum(significant, 1))).astype(int) + 1)


_TABLE_TOP = 100_000  # values below 1000 are read off a table of their hundredths (the usual case)
_DIGITS = _digits_of(np.arange(_TABLE_TOP, dtype=np.int64))


def digits(M: Any) -> np.ndarray:
    """Per value, the digits a hand solution works with, the value held at 2 decimals (what the policy writes):
    1 for a number done in the head (a whole number up to 10, a half up to 3), else its significant digits
    (0.73: 2, 1.41: 3, 12.5: 3, e^{0.5} ≈ 1.65 off the table: 3); 0 for 0 and a masked −∞."""
    M = np.asarray(M, dtype=float)
    finite = np.isfinite(M)
    hundredths = np.rint(np.minimum(np.abs(np.where(finite, M, 0.0)), 1e12) * 100).astype(np.int64)
    count = _DIGITS[hundredths] if hundredths.size == 0 or hundredths.max() < _TABLE_TOP else _digits_of(hundredths)
    return np.where(finite & (np.abs(M) > 1e-12), count, 0)


def _beyond_one(weights: Any) -> int:
    """Σ (w − 1) over the weights of the values actually there (w ≥ 1)."""
    weights = np.asarray(weights)
    return int(np.maximum(weights - 1, 0).sum())


def written(value: Any) -> Operations:
    """Writing `value` down: one cell per entry (a masked −∞ too), each digit beyond the first one more."""
    return Operations(cells=int(np.size(value)), written_digits=_beyond_one(digits(value)))


def product_operations(left: Any, right: Any) -> Operations:
    """left @ right by hand: per term, nothing when a factor is 0, an addition when one is ±1, else a
    multiply-add (Σ_ijk l_ik r_kj counted as a product of the factors' indicator matrices). A stack of
    matrices (heads) counts as the sum of its matrices."""
    left, right = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
    left = left[None, :] if left.ndim == 1 else left
    right = right[:, None] if right.ndim == 1 else right
    if left.shape[-1] != right.shape[-2]:
        raise ValueError(f"matmul: inner sizes {left.shape[-1]} and {right.shape[-2]} differ")
    lz, rz = _nonzero(left).astype(int), _nonzero(right).astype(int)
    lh, rh = lz * ~_unit(left), rz * ~_unit(right)  # factors that are not ±1
    lw, rw = digits(left), digits(right)  # 0 where the factor is 0
    terms, hard = int((lz @ rz).sum()), int((lh @ rh).sum())
    weight, hard_weight = int((lw @ rw).sum()), int(((lw * lh) @ (rw * rh)).sum())  # Σ digits(x)·digits(y)
    # a term by ±1 adds the other factor: its digits beyond one are columns of the addition
    return Operations(multiply_adds=hard, additions=terms - hard, product_digits=hard_weight - hard,
                      sum_digits=(weight - hard_weight) - (terms - hard))


def softmax_row_operations(z: Any) -> Operations:
    """One row of a softmax by hand, from its (masked) inputs."""
    return softmax_operations(np.asarray(z, dtype=float).reshape(1, -1))


def softmax_operations(Z: Any) -> Operations:
    """A row-wise softmax by hand, row by row."""
    Z = np.atleast_2d(np.asarray(Z, dtype=float))
    if Z.size == 0:
        return NONE
    Z = Z.reshape(-1, Z.shape[-1])  # (rows, keys): the rows of every matrix of a stack
    finite = np.isfinite(Z)
    visible = finite.sum(axis=1)  # (rows,)
    worked = visible > 1  # a row with at most one visible key needs nothing
    exponentials = (finite & (np.abs(Z) > 1e-12)).sum(axis=1)
    e = np.where(finite, np.exp(np.where(finite, Z, 0.0)), 0.0)  # (rows, keys) as the table gives them
    total = e.sum(axis=1, keepdims=True)  # (rows, 1)
    A = e / np.where(total > 0, total, 1.0)
    shown = digits(e)[worked]
    divided = digits(total) * digits(A)  # each weight: e_ij / Σ_j, one digit product per pair of digits
    return Operations(exponentials=int(exponentials[worked].sum()), additions=int((visible[worked] - 1).sum()),
                      divisions=int(visible[worked].sum()), cells=int(worked.sum()),  # each row's sum written
                      sum_digits=_beyond_one(shown), written_digits=_beyond_one(digits(total)[worked]),
                      division_digits=_beyond_one(divided[worked]))


# ---------------------------------------------------------------- one step's count (AttentionStep.count)

Values = Mapping[str, Any]


# A step's rule returns None where nothing is worked out: the value is read off (budget.count writes it only
# when it is asked).


def count_product(step: Any, env: Values) -> Operations | None:
    """A product by hand; by the identity (X = I, in every matrix of a stack) it is read off."""
    p = step.product
    left, right = np.asarray(env[p.left], dtype=float), np.asarray(env[p.right], dtype=float)
    return product_unless_identity(left.mT if p.left_t else left, right.mT if p.right_t else right)


def product_unless_identity(left: Any, right: Any) -> Operations | None:
    """left @ right by hand (product_operations), or None when a factor is the identity: read off."""
    left, right = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
    if is_identity(left) or is_identity(right):
        return None
    return product_operations(left, right)


def is_identity(M: np.ndarray) -> bool:
    """M is the identity matrix (in every matrix of a stack)."""
    return M.ndim >= 2 and M.shape[-1] == M.shape[-2] and bool(np.all(M == np.eye(M.shape[-1])))


def count_scale(step: Any, env: Values) -> Operations | None:
    d_k = int(env["d_k"])
    if d_k == 1:
        return None  # divided by 1: the value is read off
    root = math.sqrt(d_k)
    lookups = 0 if math.isqrt(d_k) ** 2 == d_k else 1  # √d_k read off the aid
    cells = np.asarray(env[step.scales], dtype=float)
    return Operations(divisions=int(_nonzero(cells).sum()), lookups=lookups,
                      division_digits=_beyond_one(digits(root) * digits(cells / root)))


def count_softmax(step: Any, env: Values) -> Operations:
    return softmax_operations(env["masked"])


def count_softmax_backward(step: Any, env: Values) -> Operations:
    """r_i = Σ_k a_ik g_ik per row (a term where both are nonzero, a multiply-add where neither is ±1), then
    a_ij (g_ij − r_i): one addition and one multiply-add per weight that is not 0."""
    A, G = np.asarray(env["A"], dtype=float), np.asarray(env["G_A"], dtype=float)
    weights = _nonzero(A)
    a_terms, a_hard = _factors(A)
    g_terms, g_hard = _factors(G)
    terms, hard = a_terms & g_terms, a_hard & g_hard
    term_digits = digits(A) * digits(G)  # a ±1 factor: the other's digits, added
    r = (A * np.where(np.isfinite(G), G, 0.0)).sum(axis=-1, keepdims=True)  # (…, n, 1)
    rows = weights.any(axis=-1)  # each r_i written
    moved = G - r  # g_ij − r_i
    return Operations(multiply_adds=int(hard.sum() + weights.sum()),
                      additions=int((terms & ~hard).sum() + weights.sum()),
                      cells=int(rows.sum()), written_digits=_beyond_one(digits(r)[rows]),
                      product_digits=_beyond_one(term_digits[hard]) + _beyond_one((digits(A) * digits(moved))[weights]),
                      sum_digits=_beyond_one(term_digits[terms & ~hard])
                      + _beyond_one(np.maximum(digits(G), digits(np.broadcast_to(r, G.shape)))[weights]))


def count_g_x(step: Any, env: Values) -> Operations:
    """The three products, each written, then two additions per cell to join them."""
    size = int(np.size(env["G_X"]))
    total = Operations(additions=2 * size)
    for g, w in (("G_Q", "W_Q"), ("G_K", "W_K"), ("G_V", "W_V")):
        term = np.asarray(env[g], dtype=float) @ np.asarray(env[w], dtype=float).mT
        total = total + product_operations(env[g], np.asarray(env[w], dtype=float).mT) + written(term) \
            + Operations(sum_digits=_beyond_one(digits(term)))
    return total


def count_embedding_grad(step: Any, env: Values) -> Operations:
    ids = [int(t) for t in np.asarray(env["token_ids"]).ravel()]
    repeats = len(ids) - len(set(ids))
    return Operations(additions=repeats * int(np.shape(env["G_X"])[1]))


def count_norm(step: Any, env: Values) -> Operations:
    """Per row of d entries: the mean (LayerNorm only: d − 1 additions, a division) and the d deviations, the
    squares summed (d multiply-adds, d − 1 additions) and divided by d, the square root (a division's worth,
    none when it is whole);
    per cell a division by σ (or the rms) unless it is 1, a product with γ_j unless it is ±1, β_j added
    unless it is 0."""
    X = np.asarray(env["X"], dtype=float)
    d, rows = X.shape[-1], X.size // X.shape[-1]
    layer = env.get("beta") is not None
    centred = X - X.mean(axis=-1, keepdims=True) if layer else X
    spread = np.sqrt((centred ** 2).mean(axis=-1))  # σ_i or rms_i, every row of the stack
    gamma = np.asarray(env["gamma"], dtype=float)
    scaled = int((_nonzero(gamma) & ~_unit(gamma)).sum())
    shifts = int(_nonzero(env["beta"]).sum()) if layer else 0
    row = Operations(additions=(d - 1) * (2 if layer else 1) + (d if layer else 0) + shifts,
                     multiply_adds=scaled, divisions=1 + (1 if layer else 0))
    squares = _factors(centred)[1]  # a deviation of 0 or ±1 squares to itself: no multiplication
    roots = int((np.abs(spread - np.round(spread)) > 1e-9).sum())  # a whole σ (√1, √4) is read off
    return Operations(**{k: v * rows for k, v in row.as_dict().items()}) + \
        Operations(multiply_adds=int(squares.sum()), divisions=d * int((~_unit(spread)).sum()) + roots)


def count_residual(step: Any, env: Values) -> Operations:
    """X + O: one addition per cell whose two terms are both nonzero."""
    both = _nonzero(env["X"]) & _nonzero(env["O"])
    return Operations(additions=int(both.sum()))


def count_running_sum(step: Any, env: Values) -> Operations:
    """ℓ or o (the step reads V) of the online softmax, per tile with a visible key. ℓ: each e^(s_j − m_t) looked
    up (e⁰ free), an addition per key, and where the maximum moved e^(m_{t−1} − m_t) and a multiply-add. o: the
    terms e^(s_j − m_t) v_j (a product), an addition per column, and where it moved a multiply-add per column."""
    s, m, tile = np.asarray(env["S"], dtype=float)[0], np.asarray(env["m"], dtype=float)[:, 0], int(env["tile"])
    V = np.asarray(env["V"], dtype=float) if "V" in step.inputs else None  # (n_k, d_v)
    total, before = NONE, -np.inf
    for t, top in enumerate(m):
        keys = s[t * tile:(t + 1) * tile]
        seen = np.isfinite(keys)
        if seen.any():
            moved = int(bool(np.isfinite(before)) and top > before)
            total = total + (Operations(exponentials=int(np.count_nonzero(keys[seen] != top)) + moved,
                                        additions=int(seen.sum()), multiply_adds=moved) if V is None else
                             product_operations(np.exp(keys[seen] - top)[None], V[t * tile:(t + 1) * tile][seen])
                             + Operations(additions=V.shape[1], multiply_adds=V.shape[1] * moved))
            before = top
    return total
