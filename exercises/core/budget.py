"""How long an exercise takes by hand: an operation count and the minutes it costs (DESIGN §6).

The count is what a pencil-and-paper solution needs, read from the step registry: every step from
the given values to the asked parts is done once, counted by its record's rule (exercises.core.operations),
and every value is written down as it is worked out:

    an asked part                one cell written per entry
    a value on the way           one cell written per entry too (Q, K, V, S, S/√d_k, G_A … are written
                                 to compute the next step from), with what a step writes inside it (a
                                 softmax row's sum, a softmax-gradient row's r_i); a product by the
                                 identity (X = I) is read off: no work, nothing written

A kind the pipeline does not run (several heads, two softmax scales, shapes, multiple choice)
declares `operations(ex)` in its folder; without it only the cells it asks for are counted.

Rates (seconds, operations.RATES, shown beside the minutes on Practice): 10 per multiply-add, 10 per
division, 3 per addition, 20 per exponential looked up in the eˣ table, 10 per other value read off an
aid (cos/sin, a √ that is not whole), 5 per cell written, for numbers done in the head; each digit beyond
(operations.digits) costs more: 5 per extra digit product of a multiplication, 0.5 of a division, 1 per extra
column of an addition, 2 per extra digit written. Budgets: level 1 ≤ 5 minutes, level 2 ≤ 12, level 3 ≤ 25; a
level whose problems do not fit has smaller sizes, never other rates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from . import operations as operations_module
from . import pipeline
from .operations import (
    NONE,
    RATES,
    Operations,
    digits,
    product_operations,
    softmax_operations,
    softmax_row_operations,
    written,
)
from .steps import RECORDS_OF, STEP_BY_NAME, STEPS, AttentionStep, record_for

BUDGET_MINUTES: dict[int, float] = {1: 5.0, 2: 12.0, 3: 25.0}  # at most, per level

__all__ = ["BUDGET_MINUTES", "NONE", "RATES", "Operations", "about_minutes", "count", "digits", "minutes", "operations",
           "parts_written", "product_operations", "softmax_operations", "softmax_row_operations", "step_operations",
           "within_budget", "written"]


def step_operations(step: AttentionStep, env: Mapping[str, Any]) -> Operations | None:
    """One step done by hand on the values `env` (no cells: those are counted per value written); None when
    nothing is worked out: the step only copies (the mask, the lookup) or reads its value off (a division by
    √1, a product by the identity)."""
    return step.count(step, env) if step.count is not None else None


def needed_steps(given: Mapping[str, Any], names: Iterable[str]) -> list[AttentionStep]:
    """The steps a hand solution does to reach `names` from `given`, in step order."""
    wanted: set[str] = set()
    todo = [n for n in names if n in STEP_BY_NAME and n not in given]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        todo += [i for step in RECORDS_OF[name] for i in step.inputs if i in STEP_BY_NAME and i not in given]
    return [s for s in STEPS if s.name in wanted]


def count(given: Mapping[str, Any], names: Iterable[str], env: Mapping[str, Any] | None = None,
          written: Iterable[str] | None = None) -> Operations:
    """The operations of the pipeline steps from `given` to the values `names`, each step once; the cells of
    every value worked out on the way (written down to compute the next step from) and of the values
    `written` (default: `names`; a caller that counts its parts' cells itself passes fewer). A stack of
    matrices (heads) counts as the sum of its matrices."""
    names = list(names)
    kept = set(names if written is None else written)
    env = env if env is not None else pipeline.run(dict(given))
    total = NONE
    for step in needed_steps(given, names):
        if step.name not in env or record_for(step.name, env) is not step:
            continue  # not computable from what is given (the caller counts its cells alone), or another record's
        for one in _matrices(env, np.shape(env[step.name])[:-2]):
            work = step_operations(step, one)
            total = total + (work or NONE)
            intermediate = step.name not in names and work is not None
            if step.name in kept or intermediate:
                total = total + operations_module.written(one[step.name])
    return total


def _matrices(env: Mapping[str, Any], stack: tuple[int, ...]) -> Iterable[Mapping[str, Any]]:
    """The values of each matrix of a stack of shape `stack` (every stacked value cut to that matrix, a
    value shared by the stack as it is); the values themselves when they are not stacked."""
    if not stack:
        yield env
        return
    for at in np.ndindex(stack):
        yield {k: _cut(v, at) for k, v in env.items()}


def _cut(value: Any, at: tuple[int, ...]) -> Any:
    if not isinstance(value, np.ndarray) or value.ndim <= 2:
        return value
    lead = value.shape[:value.ndim - 2]
    return value[tuple(i if size > 1 else 0 for i, size in zip(at[len(at) - len(lead):], lead))]


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
    return total + parts_written(ex, [p for p in ex.parts if p.name not in pipeline_names])


def parts_written(ex: Any, parts: Iterable[Any] | None = None) -> Operations:
    """The asked parts (default: all of them) written down: one cell per entry, by its digits."""
    return sum((written(p.reference) for p in (ex.parts if parts is None else parts)), NONE)


def minutes(ex: Any, own: Callable[[Any], Operations] | None) -> float:
    """The minutes a hand solution of `ex` takes at RATES."""
    return operations(ex, own).minutes


def about_minutes(ex: Any, own: Callable[[Any], Operations] | None) -> int:
    """The time to show ("about N minutes"): minutes rounded up to a whole minute, at least 1."""
    return max(1, math.ceil(minutes(ex, own) - 1e-9))


def within_budget(ex: Any, own: Callable[[Any], Operations] | None) -> bool:
    return minutes(ex, own) <= BUDGET_MINUTES[ex.level] + 1e-9
