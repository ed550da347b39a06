"""The sampler picks what the plain pipeline would accept.

For every kind that draws in batches, replay its generator as a plain loop would: each candidate in
order, computed alone by the step records, kept when the kind finds it hand-friendly, no guarded or own
mistake collides (misconceptions.clash_by_part, one exercise at a time) and its minutes fit the level. The
first such candidate is the exercise the sampler returns; and the sampler's stacked apartness check
agrees with the plain one on every hand-friendly candidate it saw.
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.core import engine, misconceptions, sampler
from exercises.core.grading import declared_decimals
from exercises.core.model import Exercise

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
            plain = _plain_collides(ex, batch, i, kind.GUARDS)
            if plain != bool(stacked[i]):
                disagreements.append(f"candidate {i}: plain {plain}, stacked {bool(stacked[i])}")
            if not plain and engine.within_budget(ex):
                return ex, disagreements
    raise AssertionError(f"{kind_id} level {level} seed {seed}: no candidate kept")


def _plain_collides(ex: Exercise, batch: sampler.Batch, i: int, guards) -> bool:
    """misconceptions.clash_by_part on one exercise: the guarded mistakes the step records make of its given
    values and the kind's own mistakes computed on that one candidate, kept apart all together; and (a
    careful batch) none of them near what a careful student writes, mistake by mistake. A kind whose exercise
    names its given values otherwise than its stack (`shown`: heads one by one) is asked on that one
    candidate's slice of the stack, alone (its kind's test checks the parts head by head)."""
    if batch.shown is not None:
        one = {k: (v[i:i + 1] if k in batch.stacked else v) for k, v in batch.given.items()}
        single = sampler.Batch(one, batch.stacked, ex.part_names, derive=batch.derive, sources=batch.sources,
                               own=batch.own, decimals=batch.decimals, careful=batch.careful)
        return bool(sampler.clashing(single, single.computed(one), guards)[0])
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
    if batch.careful:
        careful = engine.default_chain(ex, {}, declared_decimals(ex))
        for name, alternatives in by_part.items():
            gap = misconceptions.separation(ex.part(name))
            if name in careful and any(not misconceptions.apart(alt, careful[name], gap)
                                       for alt in alternatives.values()):
                return True
    return misconceptions.clash_by_part(misconceptions.parts_by_name(ex), by_part)


@pytest.mark.parametrize("kind_id", BATCH_KINDS)
def test_the_sampler_picks_the_first_candidate_a_plain_loop_keeps(kind_id):
    for level in exercises.KINDS[kind_id].LEVELS:
        for seed in SEEDS:
            expected, disagreements = _plain_first(kind_id, seed, level)
            assert not disagreements, f"{kind_id} level {level} seed {seed}: {disagreements}"
            got = exercises.generate(kind_id, seed, level)
            assert got.to_dict() == expected.to_dict(), f"{kind_id} level {level} seed {seed}: another candidate"


def test_a_careful_batch_keeps_mistakes_apart_from_the_rounded_answer_too():
    """backprop_loss level 3 (rng 22, its fifth batch, candidate 22): a guarded mistake lands apart from the
    answer but within reach of what a student who rounds as they write gets. Only the careful check refuses
    it, and the plain check (mistake by mistake, against the grader's rounded chain) refuses it too."""
    from dataclasses import replace

    kind = exercises.KINDS["backprop_loss"]
    rng = np.random.default_rng(22)
    for _ in range(5):
        batch = kind.draw(rng, 3)
    env = batch.computed(batch.given)
    i = 22
    assert batch.keep(env)[i] and batch.careful
    assert sampler.clashing(batch, env, kind.GUARDS)[i], "backprop_loss level 3 rng 22 batch 4 candidate 22"
    assert not sampler.clashing(replace(batch, careful=False), env, kind.GUARDS)[i]
    ex = Exercise(kind="backprop_loss", seed=0, level=3, version=kind.VERSION, given=batch.candidate(i),
                  parts=tuple(sampler._parts(batch, env, i)), params=batch.params)
    assert _plain_collides(ex, batch, i, kind.GUARDS) and not misconceptions.collides(ex, kind.GUARDS)
