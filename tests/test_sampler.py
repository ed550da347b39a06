"""The sampler picks what the plain pipeline would accept.

For every kind that draws in batches, replay its generator as a plain loop would: each candidate in
order, computed alone by the step records, kept when the kind finds it hand-friendly, no guarded
mistake collides (misconceptions.collides, one exercise at a time; for a kind whose parts the records do not
name, such as gqa's heads, the sampler's check on that candidate alone) and its minutes fit the level. The
first such candidate is the exercise the sampler returns; and the sampler's stacked apartness check
agrees with the plain one on every hand-friendly candidate it saw.
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.core import budget, engine, misconceptions, sampler
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
            ex = Exercise(kind=kind_id, seed=seed, level=level, version=kind.VERSION, given=batch.exercise_given(i),
                          parts=tuple(sampler._parts(batch, env, i)), params=batch.params)
            plain = _plain_collides(ex, batch, i, kind.GUARDS)
            if plain != bool(stacked[i]):
                disagreements.append(f"candidate {i}: plain {plain}, stacked {bool(stacked[i])}")
            if not plain and budget.within_budget(ex):
                return ex, disagreements
    raise AssertionError(f"{kind_id} level {level} seed {seed}: no candidate kept")


def _plain_collides(ex: Exercise, batch: sampler.Batch, i: int, guards) -> bool:
    """misconceptions.collides on one exercise, plus the kind's own mistakes computed on that one candidate
    alone; for a kind whose parts the records do not name (derive), its guarded mistakes too, so computed."""
    if misconceptions.collides(ex, guards):
        return True
    if not (batch.own or batch.derive):
        return False
    one = {k: (np.asarray(v)[None] if k in batch.stacked else v) for k, v in batch.candidate(i).items()}
    single = sampler.Batch(one, batch.stacked, ex.part_names, derive=batch.derive, sources=batch.sources,
                           own=batch.own, decimals=batch.decimals)
    return bool(sampler.clashing(single, single.computed(one), guards if batch.derive else ())[0])


@pytest.mark.parametrize("kind_id", BATCH_KINDS)
def test_the_sampler_picks_the_first_candidate_a_plain_loop_keeps(kind_id):
    for level in exercises.KINDS[kind_id].LEVELS:
        for seed in SEEDS:
            expected, disagreements = _plain_first(kind_id, seed, level)
            assert not disagreements, f"{kind_id} level {level} seed {seed}: {disagreements}"
            got = exercises.generate(kind_id, seed, level)
            assert got.to_dict() == expected.to_dict(), f"{kind_id} level {level} seed {seed}: another candidate"
