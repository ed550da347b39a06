"""Attention run as the step registry says, so that any exercise can be computed from whatever it gives.

Each step (exercises.core.steps) names its output, its inputs and its computation. Run from an exercise's
given matrices the registry yields every reference answer (through attention_core's own steps); run
with a set of *mistakes* it yields the wrong answers of the misconception catalog (each step makes
the first of its listed mistakes that is asked for and applies); run on a learner's own earlier
values it yields what a later step should be "consistent with" (errors carried forward).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import steps as _registry
from .numbers import round_half_up
from .steps import AttentionStep

Step = AttentionStep  # the record the runner walks (name, inputs, compute, mistakes …)
STEPS: tuple[AttentionStep, ...] = _registry.STEPS
STEP_BY_NAME: dict[str, AttentionStep] = _registry.STEP_BY_NAME


class Env(dict):
    """Values by name, plus the mistakes to make and a record of which ones changed something."""

    def __init__(self, values, mistakes: Iterable[str] = ()):
        super().__init__(values)
        self.mistakes = frozenset(mistakes)
        self.used: set[str] = set()  # the mistakes actually made
        self.tainted: set[str] = set()  # the values they changed, directly or downstream
        self.current: str | None = None  # the step being computed
        # on a stack of candidates whose mistake applies to some only: the candidates it was made for
        self.made: np.ndarray | None = None
        self.rounding: Any = None  # how computed values are written (run's `rounding`): steps read it for their aids

    def wrong(self, mistake: str, applies: bool = True) -> bool:
        """Should this step make `mistake`? Records it when it does and it can matter."""
        if mistake in self.mistakes and applies:
            self.used.add(mistake)
            if self.current:
                self.tainted.add(self.current)
            return True
        return False


def compute_step(step: AttentionStep, env: Env) -> np.ndarray:
    """The step's value on `env`: the first of its mistakes that env asks for and that applies, else
    the right computation."""
    if env.mistakes:
        made = step.mistake(env.mistakes, env)
        if made is not None and env.wrong(made.id):
            return _mistaken(step, made, env)
    return step.compute(env)


def _mistaken(step: AttentionStep, made, env: Env) -> np.ndarray:
    """The mistake's value; on a stack where it applies to some candidates only, the others' right value
    (and env.made says which candidates made it)."""
    value = np.asarray(made.compute(env), dtype=float)
    where = np.asarray(made.applies(env))
    if where.ndim == 0:
        return value
    right = np.asarray(step.compute(env), dtype=float)
    env.made = where if env.made is None else env.made | where
    return np.where(where.reshape(where.shape + (1,) * (value.ndim - where.ndim)), value, right)


# mistake id -> the steps that can make it, and the values it can change: those and everything after them
MAKERS: dict[str, frozenset[str]] = {mistake: frozenset(s.name for s in makers)
                                     for mistake, makers in _registry.mistakes().items()}
AFFECTED: dict[str, frozenset[str]] = {mistake: frozenset(_registry.downstream(set(makers)))
                                       for mistake, makers in MAKERS.items()}


def _plan(keys: frozenset) -> tuple:
    """_planned for the registry's steps (the same plan while STEPS is the same tuple, as a test may patch it)."""
    return _planned(id(STEPS), keys)[1]


@functools.lru_cache(maxsize=1024)
def _planned(steps_id: int, keys: frozenset) -> tuple[tuple, tuple]:
    """The steps a run starting from the values `keys` computes, in step order, each with its inputs, its
    mistake ids as sets (its inputs: the first of its input sets that is there):
    every step whose output is not there yet and whose inputs are there or made before it. A step that fails
    at run time (a shape a mistake made) leaves its output out, so the run checks the inputs again."""
    have = set(keys)
    plan = []
    for step in STEPS:
        inputs = None if step.name in have else step.runs_on(have)
        if inputs is None:
            continue
        have.add(step.name)
        plan.append((step, step.name, inputs, frozenset(step.mistake_ids)))
    return STEPS, tuple(plan)  # the entry holds STEPS, so no other tuple takes its id while it is cached


def computable(given: Iterable[str]) -> frozenset[str]:
    """The values a run from values named `given` holds: those and every step it plans."""
    keys = frozenset(given)
    return keys.union(name for _, name, _, _ in _plan(keys))


def run(given: dict, mistakes: Iterable[str] = (), until: Iterable[str] | None = None,
        rounding: int | None = None) -> Env:
    """Every value computable from `given`, in step order. Given values are never recomputed.

    With `rounding=d` every computed value is rounded half-up to d places as soon as it is computed
    (numbers.round_half_up; −∞ stays), and the next steps compute from the rounded value: what a
    learner gets who rounds each value they write and carries it on. Given values are left as given.
    With `rounding` a reach.Reach every written value, the aids and intermediates inside a step too (√d_k,
    eˣ, the row sums r_i), goes through it: the interval a careful student reaches (exercises.core.reach)."""
    env = Env(given, mistakes)
    env.rounding = rounding
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # once per run, not per step
        _walk(env, until, rounding)
    return env


def _walk(env: Env, until: Iterable[str] | None, rounding: int | None, only_if_made: bool = False) -> None:
    """run() on `env`, in numpy's error state as the caller set it. `only_if_made`: stop once the last
    step of the plan that can make one of the mistakes asked for is done and none was made."""
    wanted = set(until) if until is not None else None
    keys = env.keys()
    asked = env.mistakes
    tainted = env.tainted
    plan = _plan(frozenset(keys))
    last = _last_maker(plan, asked) if only_if_made else -1
    for position, (step, name, inputs, ids) in enumerate(plan):
        if position > last >= 0 and not env.used:
            break  # no step left can make the mistake: nothing this run computes from here is wrong
        if not inputs <= keys:  # an input a failed step did not make
            continue
        env.current = name
        try:
            # compute_step, inlined: the step's mistakes are looked at only when one of them is asked for
            made = step.mistake(asked, env) if asked and not ids.isdisjoint(asked) else None
            if made is not None and env.wrong(made.id):
                value = _mistaken(step, made, env)
            else:
                value = np.asarray(step.compute(env), dtype=float)
        except ValueError:  # shapes a mistake made that cannot combine (K Qᵀ of a rectangle, then A V)
            continue
        env[name] = value if rounding is None else round_half_up(value, rounding)
        if tainted and not tainted.isdisjoint(inputs):
            tainted.add(name)
        if wanted is not None and wanted <= keys:
            break


def _last_maker(plan: tuple, asked: frozenset) -> int:
    """The position in `plan` of the last step listing one of the mistakes `asked`; −1 when none does (a
    step may still make one in its own computation, as a test's patched step does: then no early stop)."""
    for position in range(len(plan) - 1, -1, -1):
        if not plan[position][3].isdisjoint(asked):
            return position
    return -1


def reference_env(ex: Any) -> dict[str, np.ndarray]:
    """Every value of an exercise computed from its given data, memoised on the (immutable) exercise."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "reference_env" not in memo:
        memo["reference_env"] = dict(run(ex.given))
    return memo["reference_env"]


def seed_reference_env(ex: Any, env: dict) -> None:
    """Memoise `env`, the values of run(given) for the given data ex was made from (a kind's draft ran the
    pipeline already), as the exercise's reference_env: the exercise's own given values in front."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "reference_env" not in memo:
        memo["reference_env"] = {**env, **ex.given}


def run_mistake(given: dict, reference: dict, mistake: str, until: Iterable[str] | None = None,
                ignoring_errors: bool = False, only_if_made: bool = False) -> Env:
    """run(given, {mistake}) that recomputes only what the mistake can change: everything upstream of
    the steps making it is taken from `reference` (the mistake-free run of the same given data).
    `ignoring_errors`: the caller runs it inside np.errstate(divide, invalid and over "ignore") already
    (one error state around many runs: misconceptions.alternatives). `only_if_made`: the caller wants
    the values only when the mistake is made (env.used): when the last step that can make it has not,
    the run stops there (env.used is empty and the values after it are missing)."""
    affected = AFFECTED.get(mistake, frozenset())
    start = {k: v for k, v in reference.items() if k not in affected}
    start.update(given)  # given values are never recomputed
    env = Env(start, (mistake,))
    if ignoring_errors:
        _walk(env, until, None, only_if_made)
    else:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            _walk(env, until, None, only_if_made)
    return env


def recompute(name: str, values: dict) -> np.ndarray | None:
    """Step `name` applied to `values` (for errors carried forward), or None if inputs are missing."""
    step = STEP_BY_NAME.get(name)
    if step is None or step.runs_on(values.keys()) is None:
        return None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        try:
            return np.asarray(step.compute(Env(values)), dtype=float)
        except (ValueError, IndexError):  # a learner's earlier value of a shape that cannot combine
            return None
