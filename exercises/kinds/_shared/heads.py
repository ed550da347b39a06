"""Several attention heads at once: their forward pass and the catalogued mistakes of each, stacked.

The kinds with several heads (multi_head, gqa) keep every head's mistakes apart when they draw. Asked
head by head, that is 14 pipeline runs per head (pipeline.run_mistake); here the same values come from
one pass of numpy over all heads and all mistakes: the same operations as the step registry's (so the
same floats, which the kinds' tests check against the pipeline), with the same conditions for when a
mistake is made.

    S = Q Kᵀ,  Z = S / √d_k,  masked = mask(Z),  A = softmax(masked) row-wise,  O = A V    (h, …) each
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...core import budget
from ...core.numbers import round_half_up

# the catalogued mistakes that can change one head's output, as the kinds list them (GUARDS, HEAD_MISTAKES)
CATALOGUED = ("transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle", "no_mask",
              "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed", "mask_zero_instead_of_inf",
              "softmax_no_normalise", "scaled_times_sqrt_dk", "scaled_by_sqrt_d_model")


def masked_at(Z: np.ndarray, cells: np.ndarray, fill: float) -> np.ndarray:
    """A copy of Z (…, n_q, n_k) with `cells` (n_q, n_k) set to `fill`."""
    out = np.array(Z, dtype=float)
    out[..., cells] = fill
    return out


@functools.lru_cache(maxsize=16)
def _triangles(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For n tokens: the cells ops.causal_mask hides (above the diagonal), and the cells the causal
    mistakes fill (4, n, n) with their fills (4, 1, 1, 1), in the order the mistakes are stacked: none
    (no_mask), the diagonal too (mask_diagonal), below it instead (mask_wrong_triangle), and the hidden
    ones with 0 (mask_zero_instead_of_inf). Read-only."""
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    cells = np.stack([np.zeros((n, n), dtype=bool), np.triu(np.ones((n, n), dtype=bool)),
                      np.tril(np.ones((n, n), dtype=bool), k=-1), upper])
    fills = np.array([0.0, -np.inf, -np.inf, 0.0]).reshape(4, 1, 1, 1)
    for a in (upper, cells, fills):
        a.setflags(write=False)
    return upper, cells, fills


def _largest(parts: list[np.ndarray]) -> np.ndarray:
    """The elementwise maximum of same-shaped arrays, NaN wherever one of them is NaN."""
    out = parts[0]
    for p in parts[1:]:
        out = np.maximum(out, p)  # (np.maximum keeps a NaN)
    return out


def _spread(cells: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """|cells[:, first] − cells[:, second]| (B, pairs), in place of one temporary."""
    out = np.take(cells, first, axis=1)
    out -= np.take(cells, second, axis=1)
    return np.abs(out, out=out)


def softmax_rows(Z: np.ndarray) -> np.ndarray:
    """ops.softmax along the rows of a stack (…, n_q, n_k): the same operations."""
    e = np.exp(Z - np.max(Z, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


class Heads:
    """h self-attention heads from their stacked Q (h, n, d_k), K (h, n, d_k) and V (h, n, d_v)."""

    def __init__(self, Q: np.ndarray, K: np.ndarray, V: np.ndarray, causal: bool, d_model: int):
        self.Q, self.K, self.V, self.causal, self.d_model = Q, K, V, bool(causal), int(d_model)
        self.h, n, self.d_k = Q.shape
        self.upper = _triangles(n)[0]  # ops.causal_mask(n)
        self.S = Q @ np.swapaxes(K, 1, 2)  # (h, n, n)
        self.Z = self.S / math.sqrt(self.d_k)  # ops.scale
        self.masked = self.mask(self.Z)
        self.A = softmax_rows(self.masked)
        self.O = self.A @ V  # (h, n, d_v)

    def mask(self, Z: np.ndarray) -> np.ndarray:
        """ops.apply_mask of a stack."""
        return masked_at(Z, self.upper, -np.inf) if self.causal else np.array(Z, dtype=float)

    def mistakes(self) -> tuple[list[str], np.ndarray]:
        """The CATALOGUED mistakes the pipeline makes for these heads (those whose conditions hold), and
        (m, h, n, d_v) the O each gives every head: what pipeline.run_mistake(…, until={"O"}) gives."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self._mistakes()

    def _mistakes(self) -> tuple[list[str], np.ndarray]:
        # every mistake's weights written into one stack (m, h, n, n): first the scores the row-softmax
        # mistakes softmax (scaled wrongly and masked as the pipeline masks, or masked wrongly), then the
        # softmax's own mistakes: the same operations on the same numbers as the pipeline's, in fewer and
        # larger numpy calls
        Q, K, V, S, Z, masked, d_k = self.Q, self.K, self.V, self.S, self.Z, self.masked, self.d_k
        h, n = Q.shape[:2]
        upper, cells, fills = _triangles(n)
        root = math.sqrt(d_k)
        row_ids = ["transposed_scores"]
        if d_k != 1:
            row_ids += ["no_scaling", "scaled_by_dk", "scaled_times_sqrt_dk"]
        if self.d_model not in (0, d_k, d_k ** 2):
            row_ids.append("scaled_by_sqrt_d_model")
        scaled = len(row_ids)  # the rows masked as the pipeline masks (causal: the hidden cells −∞)
        causal_ids = ["no_mask", "mask_diagonal", "mask_wrong_triangle", "mask_zero_instead_of_inf"][:4 if n > 1 else 3]
        if self.causal:
            row_ids += causal_ids
        column_ids = ["softmax_no_normalise", "no_exp", "softmax_columns"]
        if self.causal:
            column_ids.append("mask_after_softmax")
        r, m = len(row_ids), len(row_ids) + len(column_ids)
        A = np.empty((m, h, n, n))
        rows = np.empty((r, h, n, n))
        np.divide(K @ np.swapaxes(Q, 1, 2), root, out=rows[0])
        if d_k != 1:
            rows[1] = S
            np.divide(S, d_k, out=rows[2])
            np.multiply(S, np.sqrt(d_k), out=rows[3])
        if "scaled_by_sqrt_d_model" in row_ids:
            np.divide(S, np.sqrt(self.d_model), out=rows[scaled - 1])
        if self.causal:
            np.copyto(rows[:scaled], -np.inf, where=upper)
            k = len(causal_ids)
            np.copyto(rows[scaled:], np.where(cells[:k, None], fills[:k], Z))
        np.exp(rows - np.max(rows, axis=-1, keepdims=True), out=rows)
        np.divide(rows, np.sum(rows, axis=-1, keepdims=True), out=A[:r])  # softmax_rows of each
        np.exp(masked, out=A[r])
        finite = np.where(np.isfinite(masked), masked, 0.0)
        np.divide(finite, finite.sum(axis=-1, keepdims=True), out=A[r + 1])
        e = np.exp(masked - np.max(masked, axis=-2, keepdims=True))
        np.divide(e, np.sum(e, axis=-2, keepdims=True), out=A[r + 2])
        if self.causal:  # softmax_rows(Z) (the no_mask row's weights), then the hidden cells 0
            np.copyto(A[r + 3], A[scaled])
            A[r + 3][..., upper] = 0.0
        O = np.concatenate([A @ V, (np.swapaxes(self.A, 1, 2) @ V)[None]])  # weights_transposed last
        return [*row_ids, *column_ids, "weights_transposed"], O


def comparable(O: np.ndarray) -> np.ndarray:
    """(h, m, n, d_v) → (h, m, cells), ±∞ as misconceptions.clashes compares it (its stand-in)."""
    O = O.reshape(*O.shape[:2], -1)
    infinite = np.isinf(O)
    return np.where(infinite, np.sign(O) * 1e15, O) if infinite.any() else O


def like(values: np.ndarray, target: np.ndarray, gap: np.ndarray | float) -> np.ndarray:
    """(h, m): value m of head i (h, m, cells) within gap (per head, or one) of the head's target (h, cells)
    in every cell; NaN never is."""
    gap = np.broadcast_to(np.asarray(gap, dtype=float), (values.shape[0],))
    return np.abs(values - target[:, None, :]).max(axis=-1) <= gap[:, None]


def clash(values: np.ndarray, reference: np.ndarray, gap: np.ndarray | float) -> bool:
    """Whether misconceptions.clashes(reference[i], {id: values[i, m]}, gap) names anything for some head
    i: a value within gap of the reference, or two within gap of each other; values holding a NaN (no one
    can write them, or a mistake not made for that head) left out."""
    usable = ~np.isnan(values).any(axis=-1)  # (h, m)
    if (like(values, reference, gap) & usable).any():
        return True
    gap = np.broadcast_to(np.asarray(gap, dtype=float), (values.shape[0],))
    pair = np.abs(values[:, :, None, :] - values[:, None, :, :]).max(axis=-1) <= gap[:, None, None]  # (h, m, m)
    return bool((np.triu(pair & usable[:, :, None] & usable[:, None, :], k=1)).any())



def operations(heads: Heads, projections: list[tuple[np.ndarray, np.ndarray]], cells: int):
    """budget.count's operations for every head from its Q, K and V to its O, plus the products
    `projections` [(left (…, r, k), right (…, k, c))] that made them, plus `cells` written: a product
    term is nothing with a factor 0, an addition with a factor ±1, else a multiply-add; one division per
    nonzero score when d_k ≠ 1; per softmax row with two or more visible keys, an exponential per finite
    nonzero exponent, visible − 1 additions and visible divisions. The same counts, so the same seconds."""
    def nonzero(M):
        return np.isfinite(M) & (np.abs(M) > 1e-12)

    def unit(M):
        return np.abs(np.abs(M) - 1.0) < 1e-12

    terms = hard = 0
    for left, right in [*projections, (heads.Q, np.swapaxes(heads.K, 1, 2)), (heads.A, heads.V)]:
        lz, rz = nonzero(left).astype(float), nonzero(right).astype(float)
        terms += int((lz @ rz).sum())
        hard += int(((lz * ~unit(left)) @ (rz * ~unit(right))).sum())
    finite = np.isfinite(heads.masked)
    visible = finite.sum(axis=-1)  # (h, n)
    rows = visible > 1
    exponentials = int(((finite & (np.abs(heads.masked) > 1e-12)).sum(axis=-1))[rows].sum())
    divisions = int(visible[rows].sum()) + (int(nonzero(heads.S).sum()) if heads.d_k != 1 else 0)
    return budget.Operations(multiply_adds=hard, additions=terms - hard + int((visible[rows] - 1).sum()),
                             exponentials=exponentials, divisions=divisions, cells=int(cells))


# ---------------------------------------------------------------- one head's checks, from a table
# A head's catalogued mistakes depend on its scores S (whole numbers) and its values V alone, and each
# column of V is computed on its own (O = A V column by column): "within the gap in every cell" is "within
# the gap in every column". So the checks of every head a kind can draw are read from one small table over
# the scores it can meet × the value columns it can meet (column_table), and a head's decision is the AND
# over its value columns (head_clashes): no pipeline run, no stacked mistakes, when a kind draws.


class ColumnTable:
    """For the heads b = (scores s, one value column c) a kind can meet, given as `pairs` (B, 2) of rows of
    the scores' representatives Q, K (nS, n, d_k) and of `columns` (nC, n): the weights A[s], the right
    output column O[b], the careful student's (every step rounded to 2 places, as the pipeline's chain),
    the catalogued mistakes' columns alts[b] (M, n) (comparable: ±∞ as its stand-in, NaN where no one can
    write it), whether O[b] is whole, and per gap g the clash bits bits[b, g]: mistake m within g of O,
    mistake m within g of the careful value (when asked), mistakes m < m' within g of each other, each
    bit set only where the mistakes are usable in this column (np.packbits). index[s, c] is b (−1: not
    met)."""

    def __init__(self, Q: np.ndarray, K: np.ndarray, columns: np.ndarray, pairs: np.ndarray, causal: bool,
                 d_model: int, gaps: tuple[float, ...], careful: bool):
        nS, n, _ = Q.shape
        s_of, c_of = pairs[:, 0], pairs[:, 1]
        B = len(pairs)
        columns = np.asarray(columns, dtype=float)  # (nC, n)
        # every scores' heads once, with every column as one value matrix (n, nC), read back for the pairs
        # met (a column of A V is that column's own products: equal to one head per pair to a few 1e-15,
        # another BLAS kernel; every bit of the table the same)
        V = np.ascontiguousarray(np.broadcast_to(columns.T, (nS, n, len(columns))))
        heads = Heads(np.asarray(Q, dtype=float), np.asarray(K, dtype=float), V, causal, d_model)
        self.gaps = tuple(gaps)
        self.ids, O = heads.mistakes()  # (M, nS, n, nC)
        alts = comparable(O[:, s_of, :, c_of][..., None])  # (B, M, n) (the pair's index first)
        ref = heads.O[s_of, :, c_of]  # (B, n)
        finite = np.isfinite(ref)
        whole = np.round(np.where(finite, ref, 0.0))
        self.whole = (np.abs(np.where(finite, ref, 0.0) - whole) <= 1e-12 + 1e-5 * np.abs(whole)).all(axis=1)
        targets = [ref]
        if careful:
            def r(M):
                return round_half_up(M, 2)

            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                masked = r(heads.mask(r(heads.S / math.sqrt(heads.d_k))))
                targets.append(r(r(softmax_rows(masked)) @ V)[s_of, :, c_of])
        self.careful = targets[1] if careful else None
        M = alts.shape[1]
        first, second = np.triu_indices(M, k=1)
        # the largest difference over the cells (NaN where a mistake is not usable: never within a gap)
        cells = [np.ascontiguousarray(alts[:, :, a]) for a in range(n)]  # (B, M) each (a max over a short
        # last axis is slow: the cells one by one)
        apart = [_largest([np.abs(cells[a] - t[:, a:a + 1]) for a in range(n)]) for t in targets]  # (B, M) each
        apart.append(_largest([_spread(cells[a], first, second) for a in range(n)]))  # (B, pairs)
        bits = []
        for gap in gaps:  # (compared piece by piece: the bits joined, not the differences)
            with np.errstate(invalid="ignore"):
                bits.append(bits[-1] if bits and gap == gaps[len(bits) - 1] else
                            np.packbits(np.concatenate([piece <= gap for piece in apart], axis=1), axis=1))
        self.bits = np.stack(bits, axis=1)  # (B, G, bytes)
        self.A = np.full((nS, n, n), np.nan)
        self.A[s_of] = heads.A[s_of]
        self.O, self.alts = ref, alts
        self.index = np.full((nS, len(columns)), -1)
        self.index[s_of, c_of] = np.arange(B)
        for a in (self.bits, self.A, self.O, self.alts, self.whole, self.index,
                  *(() if self.careful is None else (self.careful,))):
            a.setflags(write=False)

    def head_clashes(self, s: np.ndarray, columns: np.ndarray, gap_of_whole: bool) -> np.ndarray:
        """(R,) whether heads with scores s (R,) and value columns `columns` (R, d_v) or (d_v,) clash: some
        mistake within the gap of the right output or the careful value, or two within the gap of each other
        (as clash and like decide on the whole head). gap_of_whole: gap 0 for a head whose output is whole
        in every cell, gap 1 otherwise (else gap 0 always)."""
        s = np.asarray(s)
        b = self.index[s[:, None], np.broadcast_to(np.asarray(columns), (len(s), np.shape(columns)[-1]))]  # (R, d_v)
        return self.head_clashes_at(b, gap_of_whole)

    def head_clashes_at(self, b: np.ndarray, gap_of_whole: bool) -> np.ndarray:
        """head_clashes of the heads whose columns are the table's rows b (R, d_v)."""
        g = (~self.whole[b].all(axis=1)).astype(int) if gap_of_whole else np.zeros(len(b), int)
        return np.bitwise_and.reduce(self.bits[b, g[:, None]], axis=1).any(axis=1)
