"""How long an exercise takes by hand: an operation count and the minutes it costs (DESIGN §6).

The count is what a pencil-and-paper solution needs, read from the step registry: every step from
the given values to the asked parts is done once, and

    a product cell               per term x·y: nothing when a factor is 0, one addition when a factor
                                 is ±1 (the other factor is added or subtracted), else one multiply-add
    a division by √d_k           one division per nonzero cell (none when d_k = 1)
    a softmax row                one exponential per finite, nonzero exponent (e⁰ = 1 and −∞ → 0
                                 need no table), the additions of its sum, one division per weight
                                 (none for a row with a single visible key)
    a softmax-gradient row       r_i = Σ_k a_ik g_ik (terms as above), then a_ij (g_ij − r_i): one
                                 addition and one multiply-add per weight that is not 0
    G_X                          its three products and the two additions per cell that join them
    an asked part                one cell written per entry (the intermediates on the way are noted
                                 as they are computed: their time is in the operations' rates)

A kind the pipeline does not run (several heads, two softmax scales, shapes, multiple choice)
declares `operations(ex)` in its folder; without it only the cells it asks for are counted.

Rates (seconds): 10 per multiply-add, 10 per division, 3 per addition, 20 per exponential looked up
in the eˣ table, 5 per cell written. Budgets: level 1 ≤ 5 minutes, level 2 ≤ 12, level 3 ≤ 25.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from . import pipeline
from .steps import STEP_BY_NAME, STEPS, AttentionStep

# seconds per operation, by hand with the formula sheet and the eˣ table
RATES: dict[str, float] = {"multiply_adds": 10.0, "divisions": 10.0, "additions": 3.0, "exponentials": 20.0,
                           "cells": 5.0}
BUDGET_MINUTES: dict[int, float] = {1: 5.0, 2: 12.0, 3: 25.0}  # at most, per level

__all__ = ["BUDGET_MINUTES", "RATES", "Operations", "about_minutes", "count", "factor_counts", "minutes", "operations",
           "within_budget"]


@dataclass(frozen=True)
class Operations:
    """What a hand solution does, by kind of operation."""

    multiply_adds: int = 0
    additions: int = 0
    exponentials: int = 0
    divisions: int = 0
    cells: int = 0

    def __add__(self, other: Operations) -> Operations:
        return Operations(*[getattr(self, name) + getattr(other, name) for name in _FIELDS])

    @property
    def seconds(self) -> float:
        return sum(RATES[name] * getattr(self, name) for name in _FIELDS)

    @property
    def minutes(self) -> float:
        return self.seconds / 60.0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_FIELDS = tuple(f.name for f in fields(Operations))  # in field order (dataclasses.fields is slow per call)
NONE = Operations()


def _nonzero(M: Any) -> np.ndarray:
    M = np.asarray(M, dtype=float)
    return np.isfinite(M) & (np.abs(M) > 1e-12)


def _unit(M: Any) -> np.ndarray:
    return np.abs(np.abs(np.asarray(M, dtype=float)) - 1.0) < 1e-12


def product_operations(left: Any, right: Any) -> Operations:
    """left @ right by hand: per term, nothing when a factor is 0, an addition when one is ±1, else a
    multiply-add."""
    terms, hard = _product_terms(left, right)
    return Operations(multiply_adds=hard, additions=terms - hard)


def _factors(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cell of M: nonzero (_nonzero), and nonzero and not ±1 (not _unit)."""
    size = np.abs(M)
    nonzero = np.isfinite(M) & (size > 1e-12)
    return nonzero, nonzero & ~(np.abs(size - 1.0) < 1e-12)


_SMALL = 64  # cells: a matrix this small is counted in plain Python (numpy's per-call cost dominates)


def factor_counts(M: np.ndarray, axis: int) -> tuple[list[int] | np.ndarray, list[int] | np.ndarray]:
    """Per index k of the product's inner axis: how many factors of M there are nonzero, and how many
    nonzero and not ±1 (`axis`: the axis of M summed over, 0 for a left factor, 1 for a right one)."""
    if M.size > _SMALL:
        nonzero, hard = _factors(M)
        return nonzero.sum(axis=axis), hard.sum(axis=axis)
    lines = M.T.tolist() if axis == 0 else M.tolist()  # one list per index k
    terms, hard = [], []
    for line in lines:  # the same float tests as _nonzero and _unit, cell by cell
        t = h = 0
        for x in line:
            size = abs(x)
            if size > 1e-12 and size != math.inf:  # finite (NaN fails size > 1e-12) and nonzero
                t += 1
                if not abs(size - 1.0) < 1e-12:
                    h += 1
        terms.append(t)
        hard.append(h)
    return terms, hard


def _dot(a, b) -> int:
    if isinstance(a, list):
        return sum(x * y for x, y in zip(a, b, strict=True))
    return int(a @ b)


def _product_terms(left: Any, right: Any) -> tuple[int, int]:
    """(terms, terms with neither factor ±1) of left @ right, zero terms skipped: Σ_ijk l_ik r_kj counted
    as Σ_k (nonzero l_·k)(nonzero r_k·), whole numbers, the same as the cell-by-cell count."""
    left, right = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
    if left.ndim != 2 or right.ndim != 2:  # a vector: the count cell by cell
        lz, rz = _nonzero(left).astype(int), _nonzero(right).astype(int)
        return int((lz @ rz).sum()), int(((lz * ~_unit(left)) @ (rz * ~_unit(right))).sum())
    l_terms, l_hard = factor_counts(left, 0)  # (k,)
    r_terms, r_hard = factor_counts(right, 1)  # (k,)
    if len(l_terms) != len(r_terms):
        raise ValueError(f"matmul: inner sizes {len(l_terms)} and {len(r_terms)} differ")
    return _dot(l_terms, r_terms), _dot(l_hard, r_hard)


def _product(step: AttentionStep, env: Mapping[str, Any]) -> Operations:
    p = step.product
    left, right = np.asarray(env[p.left], dtype=float), np.asarray(env[p.right], dtype=float)
    return product_operations(left.mT if p.left_t else left, right.mT if p.right_t else right)  # stacks too


def _scale(step: AttentionStep, env: Mapping[str, Any]) -> Operations:
    if int(env["d_k"]) == 1:
        return NONE
    return Operations(divisions=int(_nonzero(env[step.scales]).sum()))


def softmax_row_operations(z: Any) -> Operations:
    """One row of a softmax by hand, from its (masked) inputs."""
    z = np.asarray(z, dtype=float).ravel()
    finite = np.isfinite(z)
    visible = int(finite.sum())
    if visible <= 1:
        return NONE
    return Operations(exponentials=int((finite & (np.abs(z) > 1e-12)).sum()), additions=visible - 1,
                      divisions=visible)


def softmax_operations(Z: Any) -> Operations:
    """A row-wise softmax by hand: softmax_row_operations summed over the rows, all rows at once."""
    Z = np.atleast_2d(np.asarray(Z, dtype=float))
    if Z.size == 0:
        return NONE
    Z = Z.reshape(-1, Z.shape[-1])  # (rows, keys): the rows of every matrix of a stack
    finite = np.isfinite(Z)
    visible = finite.sum(axis=1)  # (rows,)
    worked = visible > 1  # a row with at most one visible key needs nothing
    exponentials = (finite & (np.abs(Z) > 1e-12)).sum(axis=1)
    return Operations(exponentials=int(exponentials[worked].sum()), additions=int((visible[worked] - 1).sum()),
                      divisions=int(visible[worked].sum()))


def _softmax(step: AttentionStep, env: Mapping[str, Any]) -> Operations:
    return softmax_operations(env["masked"])


def _softmax_backward(step: AttentionStep, env: Mapping[str, Any]) -> Operations:
    A, G = np.asarray(env["A"], dtype=float), np.asarray(env["G_A"], dtype=float)
    weights = int(_nonzero(A).sum())
    if A.shape != G.shape or A.ndim != 2:  # row by row, as written
        rowsums = NONE
        for a, g in zip(A, G):  # r_i = Σ_k a_ik g_ik
            rowsums = rowsums + product_operations(a[None, :], g[:, None])
        return rowsums + Operations(multiply_adds=weights, additions=weights)
    # r_i = Σ_k a_ik g_ik, a product per row (product_operations(a[None, :], g[:, None])): a term per k
    # where both are nonzero, a multiply-add where neither is ±1; summed over the rows at once
    a_terms, a_hard = _factors(A)
    g_terms, g_hard = _factors(G)
    terms, hard = int((a_terms & g_terms).sum()), int((a_hard & g_hard).sum())
    return Operations(multiply_adds=hard + weights, additions=terms - hard + weights)


def _g_x(step: AttentionStep, env: Mapping[str, Any]) -> Operations:
    total = Operations(additions=2 * int(np.size(env["G_X"])))
    for g, w in (("G_Q", "W_Q"), ("G_K", "W_K"), ("G_V", "W_V")):
        total = total + product_operations(env[g], np.asarray(env[w], dtype=float).T)
    return total


def _embedding_grad(step: AttentionStep, env: Mapping[str, Any]) -> Operations:
    ids = [int(t) for t in np.asarray(env["token_ids"]).ravel()]
    repeats = len(ids) - len(set(ids))
    return Operations(additions=repeats * int(np.shape(env["G_X"])[1]))


_BY_BUILDER = {"product": _product, "scale": _scale, "softmax": _softmax, "softmax_backward": _softmax_backward,
               "g_x": _g_x, "embedding_grad": _embedding_grad}


def step_operations(step: AttentionStep, env: Mapping[str, Any]) -> Operations:
    """One step done by hand on the values `env` (no cells: those are counted per value written)."""
    rule = _BY_BUILDER.get(step.builder)
    return rule(step, env) if rule is not None else NONE  # the mask and the lookup only copy


_NEEDED: dict = {}  # (given keys, names) -> _needed(...): the same few per kind and level


def _needed(given: Mapping[str, Any], names: Iterable[str]) -> list[AttentionStep]:
    """The steps a hand solution does to reach `names` from `given`, in step order (memoised on the
    names given and asked; it reads nothing else)."""
    names = tuple(names)
    key = (frozenset(given), names)
    found = _NEEDED.get(key)
    if found is None:
        if len(_NEEDED) > 4096:
            _NEEDED.clear()
        found = _NEEDED[key] = tuple(_needed_walk(given, names))
    return list(found)


def _needed_walk(given: Mapping[str, Any], names: Iterable[str]) -> list[AttentionStep]:
    wanted: set[str] = set()
    todo = [n for n in names if n in STEP_BY_NAME and n not in given]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        todo += [i for i in STEP_BY_NAME[name].inputs if i in STEP_BY_NAME and i not in given]
    return [s for s in STEPS if s.name in wanted]


def count(given: Mapping[str, Any], names: Iterable[str], env: Mapping[str, Any] | None = None,
          written: Iterable[str] | None = None) -> Operations:
    """The operations of the pipeline steps from `given` to the values `names`, each step once, and the
    cells of the values `written` (default: `names`)."""
    names = list(names)
    written = set(names if written is None else written)
    env = env if env is not None else pipeline.run(dict(given))
    sums = [0, 0, 0, 0, 0]  # in _FIELDS order; one Operations made at the end
    cells = 0
    for step in _needed(given, names):
        if step.name not in env:
            continue  # not computable from what is given: the caller counts its cells alone
        rule = _BY_BUILDER.get(step.builder)
        if rule is not None:  # step_operations (the mask and the lookup only copy)
            ops = rule(step, env)
            for index, name in enumerate(_FIELDS):
                sums[index] += getattr(ops, name)
        if step.name in written:
            cells += int(np.size(env[step.name]))
    sums[_FIELDS.index("cells")] += cells
    return Operations(*sums)


def operations(ex: Any) -> Operations:
    """The operation count of an exercise: its kind's own `operations(ex)` when it declares one, else the
    pipeline steps to its parts plus one cell per entry of each part no step computes."""
    from . import engine  # the kinds are discovered there; budget is imported by none of them at load time

    kind = engine.KINDS.get(ex.kind)
    if kind is not None and getattr(kind, "operations", None) is not None:
        return kind.operations(ex)
    names = [p.name for p in ex.parts]
    env = pipeline.reference_env(ex) if any(n in STEP_BY_NAME for n in names) else {}
    pipeline_names = [n for n in names if n in STEP_BY_NAME and n in env]
    total = count(ex.given, pipeline_names, env) if pipeline_names else NONE
    others = sum(int(np.prod(p.shape)) for p in ex.parts if p.name not in pipeline_names)
    return total + Operations(cells=others)


def minutes(ex: Any) -> float:
    """The minutes a hand solution of `ex` takes at RATES."""
    return operations(ex).minutes


def about_minutes(ex: Any) -> int:
    """The time to show ("about N minutes"): minutes rounded up to a whole minute, at least 1."""
    return max(1, math.ceil(minutes(ex) - 1e-9))


def within_budget(ex: Any) -> bool:
    return minutes(ex) <= BUDGET_MINUTES[ex.level] + 1e-9


def _batch_product_seconds(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """product_operations(left[b], right[b]) in seconds, for every b of a batch (B, r, k) @ (B, k, c)."""
    lz, rz = _nonzero(left).astype(float), _nonzero(right).astype(float)
    terms = (lz @ rz).sum(axis=(1, 2))
    hard = ((lz * ~_unit(left)) @ (rz * ~_unit(right))).sum(axis=(1, 2))
    return RATES["multiply_adds"] * hard + RATES["additions"] * (terms - hard)


def head_seconds(X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray, causal: bool) -> np.ndarray:
    """The seconds by hand of one attention head from X to O (the steps `count` does, no cells written),
    for a batch of candidate weights at once: W_* (B, d, width), X (n, d). What `count` gives for each
    candidate, computed with numpy over the whole batch, so a generator can keep the candidates that fit
    without running the pipeline on each."""
    B, n, d_k = len(W_Q), X.shape[0], W_Q.shape[2]
    Xb = np.broadcast_to(X, (B, *X.shape))
    Q, K, V = Xb @ W_Q, Xb @ W_K, Xb @ W_V  # (B, n, d_k), (B, n, d_k), (B, n, d_v)
    Kt = np.swapaxes(K, 1, 2)
    S = Q @ Kt  # (B, n, n)
    seconds = sum(_batch_product_seconds(Xb, W) for W in (W_Q, W_K, W_V)) + _batch_product_seconds(Q, Kt)
    if d_k != 1:
        seconds = seconds + RATES["divisions"] * _nonzero(S).sum(axis=(1, 2))
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    Z = S / np.sqrt(d_k)
    seen = visible.sum(axis=1)  # keys each query sees
    rows = seen > 1  # a row with one visible key needs no work
    exps = ((np.abs(Z) > 1e-12) & visible).sum(axis=2)  # (B, n)
    seconds = seconds + (RATES["exponentials"] * exps[:, rows].sum(axis=1)
                         + float(RATES["additions"] * (seen[rows] - 1).sum() + RATES["divisions"] * seen[rows].sum()))
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.where(visible, np.exp(Z - Z.max(axis=2, keepdims=True)), 0.0)
        A = e / e.sum(axis=2, keepdims=True)  # (B, n, n)
    return seconds + _batch_product_seconds(A, V)


def draw_within_budget(draw: Callable[[np.random.Generator, int], Any], rng: np.random.Generator, level: int,
                       kind_id: str, tries: int = 200) -> Any:
    """The first of `draw(rng, level)`'s drafts whose hand work fits the level's budget (from the same
    generator, so the result stays deterministic)."""
    for _ in range(tries):
        draft = draw(rng, level)
        if count(draft.given, [p.name for p in draft.parts]).minutes <= BUDGET_MINUTES[level]:
            return draft
    raise RuntimeError(f"{kind_id}: no variant within the time budget in {tries} draws")
