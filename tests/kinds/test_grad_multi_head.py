"""grad_multi_head: multi-head attention backward, through out = concat · W_O and back into one head.

Every exercise: references as attention_core computes them from the given heads, no part all zeros, its
mistakes apart (misconceptions.clashes' rule), within the level's minutes, a real softmax for the given
weights; exercises stored at earlier versions still show and grade; variety holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import exercises
from exercises.core import budget, engine, misconceptions
from exercises.core.model import Part
from exercises.kinds import grad_multi_head as K
from tests.stored_exercise import still_shows_and_grades

# exercises.generate("grad_multi_head", 3, level).to_dict() for levels 1-3, by the code at VERSION 1 (main 050cdd7)
STORED_V1 = json.loads(
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


STORED = {1: STORED_V1, 2: json.loads((Path(__file__).parent / "stored" / "grad_multi_head-v2.json").read_text())}


@pytest.mark.parametrize("version", sorted(STORED))
@pytest.mark.parametrize("level", ["1", "2", "3"])
def test_an_exercise_stored_at_an_earlier_version_still_shows_and_grades(version, level):
    ex = exercises.Exercise.from_dict(STORED[version][level])
    assert ex.version == version < K.VERSION, (version, level)
    for part in ex.parts:
        np.testing.assert_array_equal(part.reference, K.references_of(ex.given)[part.name],
                                      err_msg=f"version {version} level {level} part {part.name}")
    still_shows_and_grades(ex)


@pytest.mark.parametrize("level", K.LEVELS)
def test_every_exercise_keeps_its_guarantees(level):
    for seed in range(100):
        ex = exercises.generate(K.ID, seed, level)
        g, case = ex.given, (level, seed)
        assert not misconceptions.clash_by_part({p.name: p for p in ex.parts},
                                                {p.name: K.mistakes_of(g, p.name) for p in ex.parts}), case
        assert all(np.abs(p.reference).max() > 0 for p in ex.parts), case
        assert engine.within_budget(ex), case
        references = K.references_of(g)
        assert [p.name for p in ex.parts] == list(references), case
        for p in ex.parts:
            np.testing.assert_array_equal(p.reference, references[p.name], err_msg=f"{case} {p.name}")
        np.testing.assert_array_equal(g["concat"], np.concatenate([g["A1"] @ g["V1"], g["A2"] @ g["V2"]], axis=1))
        for name in ("A1", "A2"):  # a real softmax: simple fractions, positive wherever a key is seen
            A = g[name]
            np.testing.assert_allclose(A.sum(axis=1), 1.0, err_msg=f"{case} {name}")
            np.testing.assert_allclose(A * 12, np.round(A * 12), atol=1e-9, err_msg=f"{case} {name}")
            seen = ~np.triu(np.ones_like(A, dtype=bool), k=1) if g["causal"] else np.ones_like(A, dtype=bool)
            assert (A[seen] > 0).all() and (A[~seen] == 0).all(), (case, name)


@pytest.mark.parametrize("level", K.LEVELS)
def test_the_budget_fits_even_when_every_term_is_a_multiply_add(level):
    """Why generate counts no operations: the worst case of the level's sizes fits its budget."""
    ex = exercises.generate(K.ID, 0, level)
    worst = {k: (np.full(np.shape(v), 2.0) if isinstance(v, np.ndarray) else v) for k, v in ex.given.items()}
    parts = [Part(name=p.name, shape=p.shape, reference=np.full(p.shape, 2.0), decimals=p.decimals) for p in ex.parts]
    assert K._operations(worst, parts).minutes <= budget.BUDGET_MINUTES[level], level


@pytest.mark.parametrize("level", K.LEVELS)
def test_variety_does_not_collapse(level):
    seen = {tuple((k, np.asarray(v).tobytes()) for k, v in sorted(exercises.generate(K.ID, seed, level).given.items()))
            for seed in range(200)}
    assert len(seen) >= 180, (level, len(seen))
