"""The sampler picks what the plain pipeline would accept.

For every kind that draws in batches, replay its generator as a plain loop would: each candidate in
order, computed alone by the step records, kept when the kind finds it hand-friendly, no guarded or own
mistake collides (misconceptions.clash_by_part, one exercise at a time), its minutes fit the level and its
mistakes lie outside the interval a careful student reaches. The first such candidate is the exercise the
sampler returns; and the sampler's stacked apartness check agrees with the plain one on every
hand-friendly candidate it saw.
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.core import engine, misconceptions, sampler
from exercises.core.model import Exercise
from tests import generated

BATCH_KINDS = [k for k, kind in exercises.KINDS.items() if kind.draw is not None]
SEEDS = range(6)


def _plain_first(kind_id: str, seed: int, level: int) -> tuple[Exercise, list[str]]:
    """The first candidate a one-at-a-time loop keeps, and every disagreement with the stacked check."""
    kind = exercises.KINDS[kind_id]
    rng = engine.rng_for(kind_id, seed, level)
    disagreements = []
    for _ in range(sampler.MAX_ROUNDS):
        batch = kind.draw(rng, level)
        env = batch.computed(batch.given)
        keep = np.ones(batch.size, bool) if batch.keep is None else np.asarray(batch.keep(env), bool)
        stacked = sampler.clashing(batch, env, kind.GUARDS)
        for i in np.flatnonzero(keep):
            ex = Exercise(kind=kind_id, seed=seed, level=level, version=kind.VERSION, given=batch.candidate(i),
                          parts=tuple(sampler._parts(batch, env, i)), params=batch.params)
            plain, alternatives = _plain_collides(ex, batch, i, kind.GUARDS)
            if plain != bool(stacked[i]):
                disagreements.append(f"candidate {i}: plain {plain}, stacked {bool(stacked[i])}")
            if not plain and engine.within_budget(ex) and sampler.outside_reach(ex, alternatives, kind.chain):
                return ex, disagreements
    raise AssertionError(f"{kind_id} level {level} seed {seed}: no candidate kept")


def _plain_collides(ex: Exercise, batch: sampler.Batch, i: int, guards) -> tuple[bool, dict]:
    """misconceptions.clash_by_part on one exercise: the guarded mistakes the step records make of its given
    values and the kind's own mistakes computed on that one candidate, kept apart all together; and all those
    mistakes' values ({part: {id: value}}). A kind whose exercise names its given values otherwise than its
    stack (`shown`: heads one by one) is asked on that one candidate's slice of the stack, alone (its kind's
    test checks the parts head by head)."""
    if batch.shown is not None:
        one = {k: (v[i:i + 1] if k in batch.stacked else v) for k, v in batch.given.items()}
        single = sampler.Batch(one, batch.stacked, ex.part_names, derive=batch.derive, sources=batch.sources,
                               own=batch.own, decimals=batch.decimals)
        env = single.computed(one)
        found = sampler.mistaken(single, env, guards)
        return bool(sampler._clash(single, env, found)[0]), sampler._of_candidate(found, 0)
    by_part = {name: dict(alts) for name, alts in misconceptions.by_part(ex, guards).items()}
    if batch.own:
        one = {k: (np.asarray(v)[None] if k in batch.stacked else v) for k, v in ex.given.items()}
        single = sampler.Batch(one, batch.stacked, ex.part_names, derive=batch.derive)
        env = single.computed(one)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for mid, mistaken in batch.own.items():
                for name, value in mistaken(env).items():
                    value = np.asarray(value, dtype=float)[0]
                    if name in ex.part_names and not np.isnan(value).any() and not np.isposinf(value).any():
                        by_part.setdefault(name, {})[f"own {mid}"] = value
    return misconceptions.clash_by_part(misconceptions.parts_by_name(ex), by_part), by_part


@pytest.mark.parametrize("kind_id", BATCH_KINDS)
def test_the_sampler_picks_the_first_candidate_a_plain_loop_keeps(kind_id):
    for level in exercises.KINDS[kind_id].LEVELS:
        for seed in SEEDS:
            expected, disagreements = _plain_first(kind_id, seed, level)
            assert not disagreements, f"{kind_id} level {level} seed {seed}: {disagreements}"
            got = generated.exercise(kind_id, seed, level)
            assert got.to_dict() == expected.to_dict(), f"{kind_id} level {level} seed {seed}: another candidate"


def test_a_mistake_within_the_careful_students_reach_is_redrawn():
    """cross_attention level 1 seed 0: a candidate whose mistake no_exp lies apart from the answer (the stacked
    check keeps it) but within the interval a careful student reaches in O: graded right, it could not be
    named, so the sampler takes a later candidate."""
    kind = exercises.KINDS["cross_attention"]
    rng = engine.rng_for("cross_attention", 0, 1)
    refused = None
    for _ in range(3):
        batch = kind.draw(rng, 1)
        env = batch.computed(batch.given)
        keep = np.asarray(batch.keep(env), bool) & ~sampler.clashing(batch, env, kind.GUARDS)
        for i in np.flatnonzero(keep):
            ex = Exercise(kind="cross_attention", seed=0, level=1, version=kind.VERSION, given=batch.candidate(i),
                          parts=tuple(sampler._parts(batch, env, i)), params=batch.params)
            if not sampler.outside_reach(ex, misconceptions.by_part(ex, kind.GUARDS), kind.chain):
                refused = ex
                break
        if refused is not None:
            break
    assert refused is not None, "cross_attention level 1 seed 0: no candidate refused by the reach alone"
    wrong = {p.name: misconceptions.alternatives(refused, ["no_exp"])["no_exp"].get(p.name, p.reference)
             for p in refused.parts}
    assert exercises.grade(refused, wrong).parts["O"].correct  # inside the interval: it would be graded right
    assert exercises.generate("cross_attention", 0, 1).to_dict()["given"] != refused.to_dict()["given"]
