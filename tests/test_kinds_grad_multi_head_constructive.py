"""grad_multi_head's constructive generator (VERSION 2, issue 14): W_O and G_out drawn from pieces whose
mistakes are apart by construction, head 1's weights and the last head drawn again alone while G_V1's or
G_W_O's mistakes clash. Every exercise keeps the old guarantees (all_apart, no part all zeros, the time
budget), an exercise stored at VERSION 1 still shows and grades, and variety holds."""

from __future__ import annotations

import json

import numpy as np
import pytest

import exercises
from exercises.core import budget, misconceptions
from exercises.core.model import Part
from exercises.kinds import grad_multi_head as K
from exercises.kinds._shared.hand import all_apart
from tests.stored_exercise import still_shows_and_grades

# exercises.generate("grad_multi_head", 3, level).to_dict() for levels 1-3, by the code at VERSION 1 (main 050cdd7)
STORED = json.loads(
    "{\"1\":{\"kind\":\"grad_multi_head\",\"seed\":3,\"level\":1,\"version\":1,\"given\":{\"A1\":[[1.0,0.0],[0.5,0."
    "5]],\"V1\":[[1.0],[1.0]],\"A2\":[[1.0,0.0],[0.25,0.75]],\"V2\":[[1.0],[1.0]],\"concat\":[[1.0,1.0],[1.0,1.0]],"
    "\"W_O\":[[1.0,1.0],[0.0,-1.0]],\"G_out\":[[1.0,2.0],[2.0,0.0]],\"causal\":true},\"parts\":[{\"name\":\"G_conca"
    "t\",\"shape\":[2,2],\"decimals\":0,\"reference\":[[3.0,-2.0],[2.0,0.0]]},{\"name\":\"G_W_O\",\"shape\":[2,2],\""
    "decimals\":0,\"reference\":[[3.0,2.0],[3.0,2.0]]},{\"name\":\"G_O1\",\"shape\":[2,1],\"decimals\":0,\"referenc"
    "e\":[[3.0],[2.0]]},{\"name\":\"G_O2\",\"shape\":[2,1],\"decimals\":0,\"reference\":[[-2.0],[0.0]]},{\"name\":\""
    "G_V1\",\"shape\":[2,1],\"decimals\":0,\"reference\":[[4.0],[1.0]]}],\"params\":{\"n\":2,\"h\":2,\"d_v\":1,\"wi"
    "dth\":2,\"d_out\":2}},\"2\":{\"kind\":\"grad_multi_head\",\"seed\":3,\"level\":2,\"version\":1,\"given\":{\"A1"
    "\":[[1.0,0.0,0.0],[0.5,0.5,0.0],[0.25,0.25,0.5]],\"V1\":[[-1.0],[-2.0],[2.0]],\"A2\":[[1.0,0.0,0.0],[0.25,0.75"
    ",0.0],[0.25,0.5,0.25]],\"V2\":[[1.0],[2.0],[1.0]],\"concat\":[[-1.0,1.0],[-1.5,1.75],[0.25,1.5]],\"W_O\":[[-1."
    "0,0.0],[-1.0,-1.0]],\"G_out\":[[-1.0,-1.0],[1.0,2.0],[-1.0,2.0]],\"causal\":true},\"parts\":[{\"name\":\"G_con"
    "cat\",\"shape\":[3,2],\"decimals\":0,\"reference\":[[1.0,2.0],[-1.0,-3.0],[1.0,-1.0]]},{\"name\":\"G_W_O\",\"s"
    "hape\":[2,2],\"decimals\":2,\"reference\":[[-0.75,-1.5],[-0.75,5.5]]},{\"name\":\"G_O1\",\"shape\":[3,1],\"dec"
    "imals\":0,\"reference\":[[1.0],[-1.0],[1.0]]},{\"name\":\"G_O2\",\"shape\":[3,1],\"decimals\":0,\"reference\":"
    "[[2.0],[-3.0],[-1.0]]},{\"name\":\"G_V1\",\"shape\":[3,1],\"decimals\":2,\"reference\":[[0.75],[-0.25],[0.5]]}"
    "],\"params\":{\"n\":3,\"h\":2,\"d_v\":1,\"width\":2,\"d_out\":2}},\"3\":{\"kind\":\"grad_multi_head\",\"seed\""
    ":3,\"level\":3,\"version\":1,\"given\":{\"A1\":[[0.3333333333333333,0.3333333333333333,0.3333333333333333],[0."
    "3333333333333333,0.16666666666666666,0.5],[0.3333333333333333,0.3333333333333333,0.3333333333333333]],\"V1\":["
    "[-1.0,3.0],[1.0,3.0],[-2.0,1.0]],\"A2\":[[0.3333333333333333,0.3333333333333333,0.3333333333333333],[0.5,0.25,"
    "0.25],[0.25,0.5,0.25]],\"V2\":[[3.0,-1.0],[0.0,-2.0],[-2.0,1.0]],\"concat\":[[-0.6666666666666666,2.3333333333"
    "333335,0.33333333333333337,-0.6666666666666667],[-1.1666666666666667,2.0,1.0,-0.75],[-0.6666666666666666,2.333"
    "3333333333335,0.25,-1.0]],\"W_O\":[[0.0,1.0],[1.0,1.0],[0.0,1.0],[1.0,-1.0]],\"G_out\":[[3.0,3.0],[2.0,2.0],[1"
    ".0,1.0]],\"causal\":false},\"parts\":[{\"name\":\"G_concat\",\"shape\":[3,4],\"decimals\":0,\"reference\":[[3."
    "0,6.0,3.0,0.0],[2.0,4.0,2.0,0.0],[1.0,2.0,1.0,0.0]]},{\"name\":\"G_W_O\",\"shape\":[4,2],\"decimals\":2,\"refe"
    "rence\":[[-5.000000000000001,-5.000000000000001],[13.333333333333334,13.333333333333334],[3.25,3.25],[-4.5,-4."
    "5]]},{\"name\":\"G_O1\",\"shape\":[3,2],\"decimals\":0,\"reference\":[[3.0,6.0],[2.0,4.0],[1.0,2.0]]},{\"name\""
    ":\"G_O2\",\"shape\":[3,2],\"decimals\":0,\"reference\":[[3.0,0.0],[2.0,0.0],[1.0,0.0]]},{\"name\":\"G_V1\",\"s"
    "hape\":[3,2],\"decimals\":2,\"reference\":[[1.9999999999999998,3.9999999999999996],[1.6666666666666665,3.33333"
    "3333333333],[2.3333333333333335,4.666666666666667]]}],\"params\":{\"n\":3,\"h\":2,\"d_v\":2,\"width\":4,\"d_ou"
    "t\":2}}}"
)


@pytest.mark.parametrize("level", sorted(STORED))
def test_an_exercise_stored_at_version_1_still_shows_and_grades(level):
    ex = exercises.Exercise.from_dict(STORED[level])
    assert ex.version == 1 < K.VERSION
    for part in ex.parts:
        np.testing.assert_array_equal(part.reference, K.references_of(ex.given)[part.name])
    still_shows_and_grades(ex)


@pytest.mark.parametrize("level", K.LEVELS)
def test_every_exercise_keeps_the_guarantees_the_redraw_gave(level):
    """What generate no longer checks (G_concat's and the G_O's mistakes, the budget) holds by
    construction: held to all_apart (the rule the old generator redrew by), over many seeds."""
    for seed in range(150):
        ex = exercises.generate(K.ID, seed, level)
        g = ex.given
        assert all_apart(ex.parts, lambda p, g=g: K.mistakes_of(g, p.name)), (level, seed)
        assert K._apart(g, ex.parts), (level, seed)
        assert all(np.abs(p.reference).max() > 0 for p in ex.parts), (level, seed)
        assert budget.within_budget(ex), (level, seed)
        references = K.references_of(g)
        assert [p.name for p in ex.parts] == list(references)
        for p in ex.parts:
            np.testing.assert_array_equal(p.reference, references[p.name])
        np.testing.assert_array_equal(g["concat"], np.concatenate([g["A1"] @ g["V1"], g["A2"] @ g["V2"]], axis=1))
        for name in ("A1", "A2"):  # a real softmax: simple fractions, positive wherever a key is seen
            A = g[name]
            np.testing.assert_allclose(A.sum(axis=1), 1.0)
            np.testing.assert_allclose(A * 12, np.round(A * 12), atol=1e-9)
            seen = ~np.triu(np.ones_like(A, dtype=bool), k=1) if g["causal"] else np.ones_like(A, dtype=bool)
            assert (A[seen] > 0).all() and (A[~seen] == 0).all()


@pytest.mark.parametrize("level", K.LEVELS)
def test_the_budget_fits_even_when_every_term_is_a_multiply_add(level):
    """Why generate counts no operations: the worst case of the level's sizes fits its budget."""
    ex = exercises.generate(K.ID, 0, level)
    worst = {k: (np.full(np.shape(v), 2.0) if isinstance(v, np.ndarray) else v) for k, v in ex.given.items()}
    parts = [Part(name=p.name, shape=p.shape, reference=np.full(p.shape, 2.0), decimals=p.decimals) for p in ex.parts]
    assert K._operations(worst, parts).minutes <= budget.BUDGET_MINUTES[level]


@pytest.mark.parametrize("level", K.LEVELS)
def test_the_pieces_are_what_their_rules_say(level):
    n, h, d_v, d_out = K.SIZES[level]
    table = K._w_o_table(h * d_v, d_out, d_v)
    assert len(table) > 0 and not table.flags.writeable
    for W in table:
        assert (W != 0).any(axis=1).all() and (W != 0).any(axis=0).all()
        assert not np.array_equal(W[:d_v], W[d_v:])
        assert not np.array_equal(W[:, :d_v], np.eye(d_v, d_out))
        if W.shape[0] == W.shape[1]:
            assert not np.array_equal(W, W.T) and not np.array_equal(W, np.eye(len(W)))
    for causal in (False, True):
        weights = K._weights_table(level, n, causal)
        assert len({A.tobytes() for A in weights}) == len(weights)
        rng = np.random.default_rng(level)  # every matrix simple_weights draws is in the table
        drawn = {exercises.core.numbers.simple_weights(rng, n, exercises.core.levels.spec(level).denominators,
                                                       causal).tobytes() for _ in range(300)}
        assert drawn <= {A.tobytes() for A in weights}
    rng = np.random.default_rng(0)
    for _ in range(200):
        G = K._g_out(rng, n, d_out, K.whole_values(level))
        assert np.linalg.matrix_rank(G) == d_out and (G != 0).any(axis=1).all()


def test_no_guards_no_clash_as_the_generic_check_says():
    for level in K.LEVELS:
        for seed in range(20):
            ex = exercises.generate(K.ID, seed, level)
            assert K.collides(ex, K.GUARDS) == misconceptions.collides(ex, K.GUARDS) is False


def _given_key(ex):
    return tuple((k, np.asarray(v).tobytes()) for k, v in sorted(ex.given.items()))


@pytest.mark.parametrize("level", K.LEVELS)
def test_variety_does_not_collapse(level):
    """Distinct given values in 200 seeds: 200 at every level at VERSION 1 too."""
    seen = {_given_key(exercises.generate(K.ID, seed, level)) for seed in range(200)}
    assert len(seen) >= 180, len(seen)
