"""Solving an exercise: the walk over the step registry from what is given to what is asked, and the
kind's own solve where it has one."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core import pipeline
from ..core.model import Exercise
from ..core.numbers import decimals_for
from ..core.steps import record_for
from ..i18n import msg
from ..rendering import latex as L
from .builders import BUILDERS, _value_step
from .context import Context
from .exact import _agreeing, _exact_given, _exact_step
from .records import DeferredStep, Step, make_step


def _needed(given: Mapping[str, Any], targets: Iterable[str], env: Mapping[str, Any]) -> set[str]:
    """The computed values on the way from `given` to `targets` (given values are not recomputed)."""
    found: set[str] = set()

    def visit(name: str) -> None:
        if name in given or name in found or name not in pipeline.STEP_BY_NAME or name not in env:
            return
        found.add(name)
        for inp in pipeline.STEP_BY_NAME[name].inputs:
            visit(inp)

    for t in targets:
        visit(t)
    return found


def _shape_of(value: Any) -> tuple[int, ...]:
    """np.shape(value), without its dispatch for an array."""
    return value.shape if isinstance(value, np.ndarray) else np.shape(value)


@functools.lru_cache(maxsize=1024)
def _order(given: tuple[str, ...], targets: tuple[str, ...], env: tuple[str, ...]) -> tuple[str, ...]:
    """The computed values on the way from `given` to `targets`, in pipeline order: a function of the
    names alone (given, targets and the names the pipeline computed), so worked out once for them."""
    needed = _needed(dict.fromkeys(given), targets, dict.fromkeys(env))
    have = dict.fromkeys((*given, *env))
    return tuple(s.output for s in pipeline.STEPS if s.output in needed and s is record_for(s.output, have))


def build_context(given: Mapping[str, Any], targets: Sequence[str], places: Mapping[str, int] | int = 2,
                  values: Mapping[str, np.ndarray] | None = None, tag: str | None = None,
                  env: Mapping[str, np.ndarray] | None = None) -> Context:
    """Everything the steps from `given` to `targets` need: reference values (`values` override the
    pipeline's, e.g. the parts' own references), exact values, decimals per value, symbols.
    `env`: pipeline.run(given) when the caller has it already."""
    env = pipeline.run(given) if env is None else env
    order = list(_order(tuple(given), tuple(targets), tuple(env)))
    overrides = {k: v for k, v in (values or {}).items()
                 if k not in env or _shape_of(v) == _shape_of(env[k])}  # a same-named answer of another kind stays out
    merged = {**env, **overrides}
    causal = bool(given.get("causal", False))
    default = places if isinstance(places, int) else max(places.values(), default=2) or 2
    own = {} if isinstance(places, int) else dict(places)

    def place_map() -> dict[str, int]:  # the decimals of every value: only when some step is built
        found: dict[str, int] = {}
        for name, value in merged.items():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                found[name] = own.get(name, decimals_for(value, default))
        return found

    shown = list(order)
    reads_scaled = "masked" in shown and not causal and "masked" not in targets
    if reads_scaled:
        shown.remove("masked")  # no mask: the softmax reads the scaled scores themselves

    def symbols() -> dict[str, str]:  # made on first use, as the decimals
        found = {name: L.symbol(name, tag) for name in set(merged) | set(L.SYMBOLS)}
        if reads_scaled:
            found["masked"] = found["scaled"]
        return found

    def exact_values() -> dict[str, Any]:  # sympy work: only when some exact form is asked for
        exact: dict[str, Any] = {name: _exact_given(v) for name, v in given.items()}
        for name in order:
            try:
                xm = _exact_step(name, exact, merged)
            except (KeyError, IndexError, TypeError, ValueError):
                xm = None
            exact[name] = _agreeing(xm, np.atleast_2d(np.asarray(merged[name], dtype=float)))
        return exact

    return Context(values=merged, exact_source=exact_values, places_source=place_map, symbols_source=symbols,
                   shown=shown, needed=set(order), causal=causal, tag=tag)


def pipeline_steps(given: Mapping[str, Any], targets: Sequence[str], places: Mapping[str, int] | int = 2,
                   values: Mapping[str, np.ndarray] | None = None, tag: str | None = None) -> list[Step]:
    """The generic steps from `given` to `targets` through exercises.core.pipeline (for kinds' own solve).

    places: decimals per value name (the parts'), or one default; values: references that override
    the pipeline's (pass the parts' references); tag: a head's label, shown as a superscript."""
    ctx = build_context(given, targets, places, values, tag)
    return [BUILDERS.get(name, _value_step)(ctx, name) for name in ctx.shown]


def _answer_step(ex: Exercise, part) -> Step:
    """A part outside the pipeline (a kind without its own solve): its reference, exact where short."""
    ref = np.atleast_2d(part.reference)
    if part.is_choice:
        letter = chr(ord("A") + int(ref[0, 0]))
        return make_step(part.name, msg("solution.step.choice"), ref, 0, symbol=rf"\text{{{letter}}}",
                         exact_cells=[[rf"\text{{{letter}}}"]])
    cells = [[L.short(L.to_exact(x)) for x in row] for row in ref]
    return make_step(part.name, msg("solution.step.generic", part=msg(f"part.{part.name}")), ref,
                     part.decimals, exact_cells=cells)


# Caches are bounded LRUs keyed by the exercise itself (equal exercises share an entry): a fully
# rendered solution holds about 140 kB, so nothing is parked on exercises that pages keep for long.
CACHE_SIZE = 256


@functools.lru_cache(maxsize=CACHE_SIZE)
def exercise_context(ex: Exercise) -> Context | None:
    """The context of the pipeline walk from ex.given to its parts (None when no part is on the
    pipeline); solve and aids share it."""
    on_pipeline = [p for p in ex.parts if not p.is_choice and p.name in pipeline.STEP_BY_NAME]
    if not on_pipeline:
        return None
    return build_context(ex.given, [p.name for p in on_pipeline], places={p.name: p.decimals for p in on_pipeline},
                         values={p.name: p.reference for p in on_pipeline}, env=pipeline.reference_env(ex))


def generic_solve(ex: Exercise) -> list[Step]:
    """Pipeline steps from ex.given to the parts; parts outside the pipeline as plain answers."""
    ctx = exercise_context(ex)
    # each step is built when first used (DeferredStep): a solution never shown costs only the walk
    steps = [DeferredStep(name, _shape(ctx, name), functools.partial(BUILDERS.get(name, _value_step), ctx, name))
             for name in ctx.shown] if ctx is not None else []
    parts = {p.name: p for p in reversed(ex.parts)}  # ex.part(name): the first of that name
    steps = [s for s in steps if s.name not in parts or s.shape == parts[s.name].shape]
    shown = {s.name for s in steps}
    return steps + [_answer_step(ex, p) for p in ex.parts if p.name not in shown]


def _shape(ctx: Context, name: str) -> tuple[int, ...]:
    """ctx.val(name).shape, without the copy for a value that is a 2-D array already."""
    value = ctx.values[name]
    return value.shape if isinstance(value, np.ndarray) and value.ndim == 2 else ctx.val(name).shape


def solve(ex: Exercise) -> list[Step]:
    """The worked solution of `ex`: the kind's own solve(ex) when it has one, else the pipeline walk."""
    return list(_solved(ex))


@functools.lru_cache(maxsize=CACHE_SIZE)
def _solved(ex: Exercise) -> tuple[Step, ...]:
    from ..core import engine  # imported here: the kinds import this package

    own = getattr(engine.KINDS.get(ex.kind), "solve", None)
    return tuple(own(ex) if own is not None else generic_solve(ex))


@functools.lru_cache(maxsize=CACHE_SIZE)
def solution(kind: str, seed: int, level: int) -> tuple[Step, ...]:
    """solve(generate(kind, seed, level)), cached per process: a pure function of the triple."""
    from ..core import engine  # imported here: the kinds import this package

    return _solved(engine.generate(kind, seed, level))
