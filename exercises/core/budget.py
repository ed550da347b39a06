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
