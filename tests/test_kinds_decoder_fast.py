"""The fast paths of the decoder kinds' generators (issue 14: generate + grade ≤ 2 ms) decide as the slow
ones did: the same values, the same yes/no, so the same exercises (tests/test_pins.py holds those)."""

from __future__ import annotations

import numpy as np

from exercises.core import misconceptions, numbers
from exercises.kinds import rope
from exercises.kinds._shared.fast import all_clash_free, apart_from, clash_free
from exercises.kinds._shared.hand import all_apart

SEEDS = range(60)


def _rope_drafts():
    return [rope._draft(np.random.default_rng(seed), level) for level in rope.LEVELS for seed in SEEDS]


def test_rope_references_without_sympy_are_the_sympy_products_floats():
    for draft in _rope_drafts():
        g = draft.given
        Q_rot, K_rot = rope.exact_rotated(g["Q"], g["pos"], g["theta"]), rope.exact_rotated(g["K"], g["pos"], g["theta"])
        slow = {"Q_rot": rope._floats(Q_rot), "K_rot": rope._floats(K_rot), "scores": rope._floats(Q_rot * K_rot.T)}
        fast = rope.exact_references(g["Q"], g["K"], g["pos"], g["theta"])
        for name, value in slow.items():
            assert fast[name].shape == value.shape and np.array_equal(fast[name], value), name


def test_rope_mistakes_at_once_are_mistakes_of_part_by_part():
    for draft in _rope_drafts():
        g = draft.given
        fast = rope.guarded_mistakes(g)
        for name in rope.PARTS:
            slow = {**rope.mistakes_of(g, name), **rope._plain_score_mistakes(g, name)}
            assert list(fast[name]) == list(slow)
            assert all(np.array_equal(fast[name][mid], slow[mid]) for mid in slow)
        assert all_clash_free(draft.parts, fast) == all_apart(
            draft.parts, lambda p, g=g: {**rope.mistakes_of(g, p.name), **rope._plain_score_mistakes(g, p.name)})


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


def test_clash_free_is_no_clashes():
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


def test_apart_from_is_misconceptions_apart_for_each():
    for ref, alts in _cases(np.random.default_rng(15)):
        gap = misconceptions.GAP
        slow = all(misconceptions.apart(a, ref, gap) for a in alts.values() if np.shape(a) == ref.shape)
        assert apart_from(ref, alts, gap) == slow


def test_rope_table_of_halves_is_sympys():
    for degrees in range(-360, 721, 30):
        assert rope.HALVES_30[degrees % 360] == rope._halves_of_sympy(degrees), degrees
