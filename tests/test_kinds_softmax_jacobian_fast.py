"""softmax_jacobian's generate decides a row by a table of the rows that shrink (issue 14): the same
decisions as the rule it replaces (_shrinks, then the mistakes kept apart), row by row over every row of
every level, and the same exercises as the plain draw-and-check loop."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import exercises
from exercises.core import engine
from exercises.kinds import softmax_jacobian as K


def _every_row(level):
    n, widths, values = K.SIZES[level]
    for d_k in widths:
        for counts in itertools.product(values, repeat=n):
            if min(counts) != max(counts):
                yield d_k, counts


@pytest.mark.parametrize("level", K.LEVELS)
def test_the_table_takes_exactly_the_rows_the_plain_rule_takes(level):
    table = K._shrinking(level)
    taken = 0
    for d_k, counts in _every_row(level):
        shrinks = K._shrinks(np.array(counts), math.isqrt(d_k))
        assert ((d_k, counts) in table) == shrinks, (level, d_k, counts)
        if shrinks:  # every shrinking row keeps its mistakes apart: the check is not needed at draw time
            assert K._takes(K._built(level, d_k, np.array(counts))), (level, d_k, counts)
            taken += 1
    assert taken == len(table) > 0


def _plain(rng, level):
    """generate as it was: draw, refuse the rows that do not shrink or whose mistakes clash, build."""
    while True:
        d_k, counts = K._drawn(rng, level)
        draft = K._built(level, d_k, counts)
        if K._takes(draft):
            return draft


@pytest.mark.parametrize("level", K.LEVELS)
def test_generate_draws_what_the_plain_loop_draws(level):
    for seed in range(60):
        fast = K.generate(engine.rng_for(K.ID, seed, level), level)
        plain = _plain(engine.rng_for(K.ID, seed, level), level)
        assert fast.params == plain.params and fast.given["d_k"] == plain.given["d_k"]
        np.testing.assert_array_equal(fast.given["z"], plain.given["z"])
        for a, b in zip(fast.parts, plain.parts, strict=True):
            assert (a.name, a.shape, a.decimals) == (b.name, b.shape, b.decimals)
            np.testing.assert_array_equal(a.reference, b.reference)


def test_a_handed_out_variant_is_its_own():
    one, two = (exercises.generate(K.ID, seed, 3) for seed in (0, 0))
    assert one.given["z"] is not two.given["z"] and one.params["counts"] is not two.params["counts"]
    assert not any(p.reference.flags.writeable for p in one.parts)
