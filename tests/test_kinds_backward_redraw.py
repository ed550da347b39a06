"""The backward kinds answer the engine's redraw test early (misconceptions.clash_by_part): every variant
they refuse themselves is one the engine would refuse (so the exercises stay those the pins hold), and a
check they leave out is one that always passes. (backprop's own tests of this, since its constructive
generator of VERSION 4: tests/test_kinds_backprop_constructive.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from exercises.core import budget, engine, misconceptions
from exercises.core.draft import reference_parts
from exercises.core.levels import spec
from exercises.core.model import Exercise
from exercises.kinds import backprop_loss, grad_weighted_sum


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


def test_backprop_level_3_always_fits_its_budget():
    """Its budget check is left out: the count with every cell a nonzero non-unit (the most work a
    variant of its sizes can need; zeros and ±1 only save work) fits the level's minutes."""
    rng = np.random.default_rng(0)
    ex = engine.generate("backprop", 0, 3)
    given = dict(ex.given)
    for name, value in given.items():
        if isinstance(value, np.ndarray) and name != "A":
            given[name] = rng.uniform(1.5, 2.5, value.shape) * rng.choice([-1, 1], value.shape)
    A = np.tril(rng.uniform(0.1, 0.5, ex.given["A"].shape))
    given["A"] = A / A.sum(axis=1, keepdims=True)  # every visible weight positive, none 1 but the first row's
    assert budget.count(given, ex.part_names).minutes <= budget.BUDGET_MINUTES[3]


def _apart_value_by_value(ex, by_part) -> bool:
    """The rounding check written plainly: every mistake's value apart from the careful student's, one by one."""
    from exercises.core.grading import declared_decimals

    careful = engine.default_chain(ex, {}, declared_decimals(ex))
    return all(misconceptions.apart(alt, careful[name], misconceptions.separation(ex.part(name)))
               for name, alts in by_part.items() if name in careful for alt in alts.values())


@pytest.mark.parametrize("level", backprop_loss.LEVELS)
def test_backprop_loss_checks_decide_as_the_engine_and_the_rounding_check(level):
    from exercises.kinds._shared.apart import apart_from_rounded

    seen = 0
    for seed in range(60):
        rng = engine.rng_for("backprop_loss", seed, level)
        found = backprop_loss._draft(rng, level)
        if found is None:
            continue
        ex = _exercise(backprop_loss, level, found[0])
        by_part = misconceptions.by_part(ex, backprop_loss.GUARDS)
        assert (misconceptions.clash_by_part(misconceptions.parts_by_name(ex), by_part)
                == bool(misconceptions.collisions(ex, backprop_loss.GUARDS)))
        assert (apart_from_rounded(ex, backprop_loss.GUARDS, engine.default_chain)
                == _apart_value_by_value(ex, by_part))
        seen += 1
    assert seen > 5
