"""How long an exercise takes by hand: an operation count and the minutes it costs (DESIGN §6).

The count is what a pencil-and-paper solution needs, read from the step registry: every step from
the given values to the asked parts is done once, counted by its record's rule (exercises.core.operations),

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
from typing import Any

import numpy as np

from . import pipeline
from .operations import NONE, RATES, Operations, product_operations, softmax_operations, softmax_row_operations
from .steps import STEP_BY_NAME, STEPS, AttentionStep

BUDGET_MINUTES: dict[int, float] = {1: 5.0, 2: 12.0, 3: 25.0}  # at most, per level

__all__ = ["BUDGET_MINUTES", "NONE", "RATES", "Operations", "about_minutes", "count", "minutes", "operations",
           "product_operations", "softmax_operations", "softmax_row_operations", "step_operations", "within_budget"]


def step_operations(step: AttentionStep, env: Mapping[str, Any]) -> Operations:
    """One step done by hand on the values `env` (no cells: those are counted per value written)."""
    return step.count(step, env) if step.count is not None else NONE  # the mask and the lookup only copy


def needed_steps(given: Mapping[str, Any], names: Iterable[str]) -> list[AttentionStep]:
    """The steps a hand solution does to reach `names` from `given`, in step order."""
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
    total = NONE
    for step in needed_steps(given, names):
        if step.name not in env:
            continue  # not computable from what is given: the caller counts its cells alone
        total = total + step_operations(step, env)
        if step.name in written:
            total = total + Operations(cells=int(np.size(env[step.name])))
    return total


def operations(ex: Any, own: Callable[[Any], Operations] | None) -> Operations:
    """The operation count of an exercise: its kind's own count `own(ex)` when the kind declares one (the
    engine's Kind.operations), else the pipeline steps to its parts plus one cell per entry of each part
    no step computes."""
    if own is not None:
        return own(ex)
    names = [p.name for p in ex.parts]
    env = pipeline.reference_env(ex) if any(n in STEP_BY_NAME for n in names) else {}
    pipeline_names = [n for n in names if n in STEP_BY_NAME and n in env]
    total = count(ex.given, pipeline_names, env) if pipeline_names else NONE
    others = sum(int(np.prod(p.shape)) for p in ex.parts if p.name not in pipeline_names)
    return total + Operations(cells=others)


def minutes(ex: Any, own: Callable[[Any], Operations] | None) -> float:
    """The minutes a hand solution of `ex` takes at RATES."""
    return operations(ex, own).minutes


def about_minutes(ex: Any, own: Callable[[Any], Operations] | None) -> int:
    """The time to show ("about N minutes"): minutes rounded up to a whole minute, at least 1."""
    return max(1, math.ceil(minutes(ex, own) - 1e-9))


def within_budget(ex: Any, own: Callable[[Any], Operations] | None) -> bool:
    return minutes(ex, own) <= BUDGET_MINUTES[ex.level] + 1e-9


# ---------------------------------------------------------------- kept until the kinds that read them draw in batches

import math as _math  # noqa: E402,F811

from .operations import _factors, _nonzero, _unit  # noqa: E402

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
            if size > 1e-12 and size != _math.inf:  # finite (NaN fails size > 1e-12) and nonzero
                t += 1
                if not abs(size - 1.0) < 1e-12:
                    h += 1
        terms.append(t)
        hard.append(h)
    return terms, hard


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
