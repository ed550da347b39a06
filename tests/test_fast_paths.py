"""The engine's fast paths decide exactly as the plain computations they replace (issue 14, speed).

Each test runs a straightforward reference implementation (the code as it was before it was made
fast: cell by cell, step by step) next to the fast one over many random inputs, −∞, +∞ and NaN
included, and asks for the same answer: the same clashes in the same order, the same operation
counts, the same values bit for bit. No timing here (speed is measured in bench/)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import exercises
from exercises.core import misconceptions, numbers, pipeline, sampler
from exercises.kinds._shared.fast import apart_from, clash_free

RNG_SEED = 14


# ---------------------------------------------------------------- clashes


def plain_clashes(reference, alts, gap):
    """clashes() pair by pair, cell by cell: −∞ only near −∞ (and +∞ near +∞), NaN values left out."""
    def near(a, b):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if a.shape != b.shape:
            return False
        for x, y in zip(a.ravel(), b.ravel()):
            if np.isnan(x) or np.isnan(y):  # (a NaN in the reference: nothing is near it)
                return False
            if np.isinf(x) or np.isinf(y):
                if not (np.isinf(x) and np.isinf(y) and np.sign(x) == np.sign(y)):
                    return False
            elif abs(x - y) > gap:
                return False
        return True

    usable = [(mid, alt) for mid, alt in alts.items() if not np.isnan(alt).any()]
    found = [mid for mid, alt in usable if near(alt, reference)]
    found += [f"{a}+{b}" for (a, x), (b, y) in itertools.combinations(usable, 2) if near(x, y)]
    return found


def random_value(rng, shape, base=None):
    """A value near `base` (or anywhere), some cells −∞, +∞ or NaN now and then."""
    value = (np.array(base, dtype=float) if base is not None else rng.integers(-3, 4, size=shape).astype(float))
    value = value + rng.choice([0.0, 0.0, 0.004, -0.009, 0.02, 1.0], size=shape)
    for special in (-np.inf, np.inf, np.nan):
        if rng.random() < 0.15:
            value[tuple(rng.integers(s) for s in shape)] = special
    return value


@pytest.mark.parametrize("mixed_shapes", [False, True])
def test_clashes_and_any_clash_agree_with_the_plain_pairwise_comparison(mixed_shapes):
    rng = np.random.default_rng(RNG_SEED)
    gap = misconceptions.GAP
    for _ in range(600):
        shape = tuple(int(s) for s in rng.integers(1, 4, size=2))
        reference = random_value(rng, shape)
        if rng.random() < 0.3:
            reference[0, 0] = -np.inf
        alts = {}
        for k in range(int(rng.integers(0, 7))):
            base = reference if rng.random() < 0.4 else None
            other = shape if not (mixed_shapes and rng.random() < 0.4) else (shape[1], shape[0] + 1)
            alts[f"m{k}"] = random_value(rng, other, base if other == shape else None)
        expected = plain_clashes(reference, alts, gap)
        assert misconceptions.clashes(reference, alts, gap) == expected
        assert misconceptions.any_clash(reference, alts, gap) == bool(expected)


@pytest.mark.parametrize("kind_id", ["attention", "masking", "softmax", "backprop", "grad_projections", "scaling"])
def test_collides_is_whether_there_are_collisions(kind_id):
    kind = exercises.KINDS[kind_id]
    for level in kind.LEVELS:
        def make(given, parts, params, level=level):
            return exercises.Exercise(kind=kind_id, seed=0, level=level, version=kind.VERSION, given=given,
                                      parts=tuple(parts), params=params)

        seen = sampler.candidates(kind, exercises.rng_for(kind_id, 777, level), level, make)
        for _, ex in zip(range(8), seen):  # drafts as the engine sees them, colliding ones included
            fresh = make(ex.given, ex.parts, ex.params)
            assert misconceptions.collides(ex, kind.GUARDS) == bool(misconceptions.collisions(fresh, kind.GUARDS))


# ---------------------------------------------------------------- the pipeline's plan


def plain_run(given, mistakes=(), until=None, rounding=None):
    """pipeline.run as a walk over every step of the registry, each looked at in turn."""
    env = pipeline.Env(given, mistakes)
    wanted = set(until) if until is not None else None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step in pipeline.STEPS:
            if step.name in env or not all(i in env for i in step.inputs):
                continue
            env.current = step.name
            try:
                value = np.asarray(pipeline.compute_step(step, env), dtype=float)
            except ValueError:
                continue
            env[step.name] = value if rounding is None else numbers.round_half_up(value, rounding)
            if env.tainted and env.tainted.intersection(step.inputs):
                env.tainted.add(step.name)
            if wanted is not None and wanted <= env.keys():
                break
    return env


def same_env(a, b):
    assert list(a) == list(b)
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=True), name
            assert np.array_equal(np.signbit(x), np.signbit(y)), name  # bit for bit: −0.0 too
        else:
            assert x == y, name
    assert a.used == b.used and a.tainted == b.tainted


@pytest.mark.parametrize("kind_id", [k for k in exercises.KINDS if k not in ("concepts", "shapes")])
def test_the_planned_run_is_the_step_by_step_run(kind_id):
    for level in exercises.KINDS[kind_id].LEVELS:
        ex = exercises.generate(kind_id, 3, level)
        given = dict(ex.given)
        same_env(pipeline.run(given), plain_run(given))
        same_env(pipeline.run(given, rounding=2), plain_run(given, rounding=2))
        reference = dict(plain_run(given))
        for mid in misconceptions.CATALOG:
            until = set(ex.part_names)
            fast = pipeline.run_mistake(given, reference, mid, until=until)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                quiet = pipeline.run_mistake(given, reference, mid, until=until, ignoring_errors=True)
            start = {k: v for k, v in reference.items() if k not in pipeline.AFFECTED.get(mid, frozenset())}
            start.update(given)
            plain = plain_run(start, {mid}, until)
            same_env(fast, plain)
            same_env(quiet, plain)
            # stopped early only where the mistake is not made: then nothing it would have computed is named
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                made = pipeline.run_mistake(given, reference, mid, until=until, ignoring_errors=True,
                                            only_if_made=True)
            if plain.used:
                same_env(made, plain)
            else:
                assert not made.used and not made.tainted
        # a learner's own earlier values: a start the plan has not seen
        values = {p.name: p.reference + 0.5 for p in ex.parts if p.name in pipeline.STEP_BY_NAME}
        same_env(pipeline.run({**given, **values}, rounding=2), plain_run({**given, **values}, rounding=2))


# ---------------------------------------------------------------- decimals


def test_decimals_for_is_the_numpy_test():
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(2000):
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 5))) if rng.random() < 0.9 else (9, 9)
        ref = rng.integers(-5, 6, size=shape).astype(float)
        ref = ref + rng.choice([0.0, 0.0, 1e-13, 1e-6, 0.5, 0.25, -1e-11], size=shape)
        if rng.random() < 0.3:
            ref[0, 0] = rng.choice([-np.inf, np.inf, np.nan, 2.5e6 + 1.0, 1e300])
        finite = ref[np.isfinite(ref)]
        whole = np.round(finite)
        expected = 0 if bool(np.all(np.abs(finite - whole) <= 1e-12 + 1e-5 * np.abs(whole))) else 2
        assert numbers.decimals_for(ref, 2) == expected


def test_any_along_and_all_along_are_numpys_any_and_all():
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(300):
        shape = tuple(int(s) for s in rng.integers(0, 5, size=int(rng.integers(1, 4))))
        if rng.random() < 0.1:
            shape = (3, 20)  # past the folded length
        b = rng.random(shape) < rng.choice([0.1, 0.5, 0.9])
        for axis in range(len(shape)):
            assert np.array_equal(numbers.any_along(b, axis), b.any(axis=axis))
            assert np.array_equal(numbers.all_along(b, axis), b.all(axis=axis))
    M = rng.integers(-1, 2, size=(400, 3, 4)).astype(float)
    nonzero = M != 0
    assert np.array_equal(numbers.no_zero_lines(M), nonzero.any(axis=2).all(axis=1) & nonzero.any(axis=1).all(axis=1))


# ---------------------------------------------------------------- _shared/fast.py (variance, positional), nonzero_matrix


def _cases(rng: np.random.Generator):
    """References and mistakes that are near, equal, −∞ in places, NaN, or of other shapes."""
    for _ in range(1000):
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)))
        ref = rng.choice([-1.0, 0.0, 0.5, 1.0], size=shape)
        if rng.random() < 0.2:
            ref[0, 0] = -np.inf
        alts = {}
        for k in range(int(rng.integers(0, 6))):
            kind = rng.integers(5)
            if kind == 0:
                alt = ref + rng.choice([0.0, 0.004, misconceptions.GAP, 0.02], size=shape)  # on the gap too
            elif kind == 1:
                alt = rng.choice([-1.0, 0.0, 1.0], size=shape)
            elif kind == 2:
                alt = rng.choice([-1.0, 0.0, 1.0], size=shape[::-1])
            elif kind == 3:
                alt = np.where(rng.random(shape) < 0.5, -np.inf, ref)
            else:
                alt = ref.copy()
                alt.flat[0] = np.nan
            alts[f"m{k}"] = alt
        yield ref, alts


def test_fast_clash_free_is_no_clashes():
    for ref, alts in _cases(np.random.default_rng(14)):
        for gap in (misconceptions.GAP, 1e-9 + misconceptions.ROUNDING):
            assert clash_free(ref, alts, gap) == (not misconceptions.clashes(ref, alts, gap))


def _plain_nonzero_matrix(rng, shape, values):
    """numbers.nonzero_matrix as it was written before its fast path: draw, test, draw again."""
    while True:
        M = numbers.matrix(rng, shape, values)
        if np.all(np.any(M != 0, axis=1)) and np.all(np.any(M != 0, axis=0)):
            return M


def test_nonzero_matrix_draws_as_the_plain_redraw():
    for shape, values in (((2, 1), (0, 1, 2)), ((3, 4), (-1, 0, 1, 2)), ((1, 2), (-2, -1, 1, 2)), ((1, 3), (0, 1)),
                          ((1, 1), (0, 1))):
        slow, fast = np.random.default_rng(7), np.random.default_rng(7)
        for _ in range(500):
            assert np.array_equal(_plain_nonzero_matrix(slow, shape, values),
                                  numbers.nonzero_matrix(fast, shape, values))
        assert slow.integers(1 << 30) == fast.integers(1 << 30)  # the same state after


def test_fast_apart_from_is_misconceptions_apart_for_each():
    for ref, alts in _cases(np.random.default_rng(15)):
        gap = misconceptions.GAP
        slow = all(misconceptions.apart(a, ref, gap) for a in alts.values() if np.shape(a) == ref.shape)
        assert apart_from(ref, alts, gap) == slow
