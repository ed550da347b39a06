"""The backward kinds answer the engine's redraw test early (misconceptions.clash_by_part): every variant
they refuse themselves is one the engine would refuse (so the exercises stay those the pins hold), and a
check they leave out is one that always passes. (backprop and backprop_loss draw through the sampler:
tests/test_sampler.py, tests/kinds/.)"""

from __future__ import annotations

import numpy as np

from exercises.core import engine, misconceptions
from exercises.core.draft import reference_parts
from exercises.core.levels import spec
from exercises.core.model import Exercise
from exercises.kinds import grad_weighted_sum


def _exercise(kind, level: int, draft) -> Exercise:
    return Exercise(kind=kind.ID, seed=0, level=level, version=kind.VERSION, given=draft.given,
                    parts=tuple(draft.parts), params=draft.params)


def test_clash_decides_as_clashes():
    rng = np.random.default_rng(3)
    for _ in range(400):
        shape = (2, int(rng.integers(1, 4)))
        ref = rng.integers(-2, 3, shape).astype(float)
        values = [ref + rng.choice([0.0, 0.004, 0.02, 1.0], shape) for _ in range(int(rng.integers(1, 5)))]
        if rng.random() < 0.2:
            values[0] = np.where(rng.random(shape) < 0.5, -np.inf, values[0])
        if rng.random() < 0.1:
            values[-1] = np.full(shape, np.nan)
        gap = misconceptions.GAP
        alts = {str(i): v for i, v in enumerate(values)}
        assert misconceptions.any_clash(ref, values, gap) == bool(misconceptions.clashes(ref, alts, gap))
        assert misconceptions.any_clash(ref, alts, gap) == bool(misconceptions.clashes(ref, alts, gap))


def test_grad_weighted_sum_refuses_only_what_the_engine_refuses():
    refused = 0
    for level in grad_weighted_sum.LEVELS:
        s = spec(level)
        for seed in range(60):
            rng = engine.rng_for("grad_weighted_sum", seed, level)
            n = 2 if level == 1 else int(rng.choice(s.n))
            d_v = int(rng.integers(2, 4))
            A = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None] if seed % 2 else np.full((n, n), 1 / n)
            V = rng.integers(-2, 3, (n, d_v)).astype(float)
            G_O = rng.integers(-2, 3, (n, d_v)).astype(float)
            given = grad_weighted_sum._given(A, V, G_O, bool(seed % 2))
            parts = reference_parts(given, grad_weighted_sum.PARTS, s.decimals)
            draft = grad_weighted_sum._draft(given, parts)
            answers = grad_weighted_sum._answers(given, s.decimals)
            assert all(np.array_equal(answers[p.name].reference, p.reference) and answers[p.name].decimals == p.decimals
                       for p in parts)
            ours = misconceptions.clash_by_part(answers, grad_weighted_sum._mistakes(given))
            theirs = bool(misconceptions.collisions(_exercise(grad_weighted_sum, level, draft),
                                                    guards=grad_weighted_sum.GUARDS))
            assert ours == theirs, (level, seed)
            refused += ours
    assert refused > 0  # the test sees refusals, not only variants that pass
