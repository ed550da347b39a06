"""Each kind's redraw guards only the mistakes it declares (GUARDS), so a mistake added to the catalog
redraws no exercise of a kind that does not declare it (one new id once changed 56 of 3,240).

GUARDS is exactly the set of catalogued mistakes that can apply to the kind's exercises today, so the
filter changed no exercise (tests/test_pins.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import exercises
from exercises.cli import pins
from exercises.core import engine, misconceptions, pipeline, sampler
from exercises.core.model import Exercise

NEW = "scaled_by_sqrt_n"  # a mistake the catalog does not have: divided by √n (the tokens) instead of √d_k


def drafts(kind_id: str, seed: int, level: int, pick: str):
    """Every exercise the generator draws for (kind, seed, level), the redrawn ones included, up to the one
    it keeps, whose fingerprint is `pick`."""
    kind = exercises.KINDS[kind_id]

    def make(given, parts, params):
        return Exercise(kind=kind_id, seed=seed, level=level, version=kind.VERSION, given=given, parts=tuple(parts),
                        params=params)

    for ex in sampler.candidates(kind, engine.rng_for(kind_id, seed, level), level, make):
        yield ex
        if pins.fingerprint(ex) == pick:
            return
    raise AssertionError(f"{kind_id} level {level} seed {seed}: the sampler's candidates never reach its pick")


def made_on_the_way(batch: sampler.Batch) -> set[str]:
    """The catalogued mistakes the step records make, writably, on the way to a part of some hand-friendly
    candidate of `batch`, the values its derived parts read included: for a kind whose exercises name their
    given values otherwise than its stack (the heads of multi_head and gqa), on which
    misconceptions.alternatives runs no record."""
    env = batch.computed(batch.given)
    keep = np.ones(batch.size, bool) if batch.keep is None else np.asarray(batch.keep(env), bool)
    needed = {source for name in batch.parts for source in batch.sources.get(name, (name,))}
    made = set()
    for mid in misconceptions.CATALOG:
        if not pipeline.AFFECTED.get(mid, frozenset()) & needed:
            continue
        run = pipeline.run_mistake(batch.given, env, mid, until=needed, only_if_made=True)
        if not run.used:
            continue
        values = {**run, **(batch.derive(run) if batch.derive is not None else {})}
        where = keep if run.made is None else keep & run.made.reshape(batch.size, -1).any(axis=1)
        for name in batch.parts:
            if run.tainted & set(batch.sources.get(name, (name,))) and np.shape(values[name]) == np.shape(env[name]):
                cells = np.asarray(values[name], dtype=float).reshape(batch.size, -1)
                if (where & ~np.isnan(cells).any(axis=1) & ~(cells == np.inf).any(axis=1)).any():
                    made.add(mid)
    return made


def recording(draw, batches: list):
    """`draw` that keeps every batch it draws in `batches`."""
    def drawn(rng, level):
        batches.append(draw(rng, level))
        return batches[-1]
    return drawn


@pytest.fixture(scope="module")
def applicable(current_pins):
    """{kind: every catalogued mistake that applied to any draw of seeds 0–29 at any level}; for a kind
    whose exercises name their given values otherwise than its stack, every mistake the records made on
    the way to its parts in the batches drawn. The pick of each draw is known by its fingerprint, which the
    pins test computes anyway: the exercises are generated once for both."""
    found: dict[str, set[str]] = {}
    mp = pytest.MonkeyPatch()
    try:
        for kind_id, kind in exercises.KINDS.items():
            batches: list[sampler.Batch] = []
            if kind.draw is not None:  # every batch the sampler draws, kept
                mp.setattr(kind, "draw", recording(kind.draw, batches))
            seen: set[str] = set()
            for level in kind.LEVELS:
                for seed, pick in zip(pins.SEEDS, current_pins[kind_id]["levels"][str(level)], strict=True):
                    for ex in drafts(kind_id, seed, level, pick):
                        seen.update(misconceptions.alternatives(ex))
            for batch in batches:
                if batch.shown is not None:
                    seen |= made_on_the_way(batch)
            found[kind_id] = seen
            mp.undo()
    finally:
        mp.undo()
    return found


@pytest.mark.parametrize("kind_id", list(exercises.KINDS))
def test_a_kind_declares_every_catalogued_mistake_its_exercises_can_make_and_no_other(applicable, kind_id):
    guards = exercises.KINDS[kind_id].GUARDS
    assert len(set(guards)) == len(guards) and set(guards) <= set(misconceptions.CATALOG)
    undeclared = applicable[kind_id] - set(guards)
    assert not undeclared, f"{kind_id} can make {sorted(undeclared)}: add them to its GUARDS (and bump VERSION " \
                           "if the pins change)"
    assert set(guards) == applicable[kind_id], f"{kind_id} guards {sorted(set(guards) - applicable[kind_id])}, " \
                                               "which none of its exercises can make"


def test_filters_are_backward_compatible():
    ex = exercises.generate("attention", 4, 2)
    every = misconceptions.alternatives(ex)
    assert misconceptions.alternatives(ex, None) == every and misconceptions.collisions(ex) == []
    some = misconceptions.alternatives(ex, ["no_scaling", "weights_transposed", "not_a_mistake"])
    assert set(some) == {"no_scaling", "weights_transposed"} & set(every)
    assert misconceptions.alternatives(ex, ()) == {} and misconceptions.collisions(ex, guards=()) == []


@pytest.fixture
def new_mistake(monkeypatch):
    """NEW in the catalog and in the pipeline's scaling step, as a real alternative computation: it
    gives the right answer whenever n = d_k (the scaling kind's level 3 draws n = 4, d_k = 4 or 8)."""
    step = pipeline.STEP_BY_NAME["scaled"]

    def compute(env, original=step.compute):
        if env.wrong(NEW):
            S = np.asarray(env["scores"], dtype=float)  # (n, n)
            return S / np.sqrt(S.shape[1])
        return original(env)

    patched = replace(step, compute=compute)
    monkeypatch.setattr(pipeline, "STEPS", tuple(patched if s is step else s for s in pipeline.STEPS))
    monkeypatch.setitem(pipeline.STEP_BY_NAME, "scaled", patched)
    monkeypatch.setitem(pipeline.MAKERS, NEW, pipeline.MAKERS["no_scaling"])  # the step that makes it
    monkeypatch.setitem(pipeline.AFFECTED, NEW, pipeline.AFFECTED["no_scaling"])  # what the scaling step changes
    monkeypatch.setattr(misconceptions, "CATALOG", (*misconceptions.CATALOG, NEW))
    return NEW


SOME_SEEDS = range(10)


def changed(kinds: list[str]) -> list[str]:
    """The (kind, level, seed) of seeds 0–9 whose exercise differs from its pin."""
    pinned = pins.load()
    return [f"{k} level {level} seed {seed}" for k in kinds for level in exercises.KINDS[k].LEVELS
            for seed in SOME_SEEDS
            if pins.fingerprint(exercises.generate(k, seed, level)) != pinned[k]["levels"][str(level)][seed]]


def test_a_new_catalog_mistake_changes_no_exercise_of_a_kind_that_does_not_declare_it(new_mistake, monkeypatch):
    ex = exercises.generate("scaling", 0, 3)
    assert new_mistake in misconceptions.alternatives(ex), "the new mistake applies to the scaling kind"
    assert changed(list(exercises.KINDS)) == []
    # the same mistake declared by one kind redraws that kind's colliding variants, and only those
    monkeypatch.setattr(exercises.KINDS["scaling"], "GUARDS", (*exercises.KINDS["scaling"].GUARDS, new_mistake))
    redrawn = changed(["scaling"])
    assert redrawn and all(r.startswith("scaling ") for r in redrawn)
    for item in redrawn:
        _, _, level, _, seed = item.split()
        assert misconceptions.collisions(exercises.generate("scaling", int(seed), int(level))) == []
