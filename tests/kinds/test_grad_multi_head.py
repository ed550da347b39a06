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
from attention_core import softmax
from exercises.core import budget, engine, grading, misconceptions
from exercises.core.model import Part
from exercises.core.numbers import round_half_up
from exercises.kinds import grad_multi_head as K
from tests.kinds.common import (
    assert_careful_students_are_right,
    central_difference,
    named_mistakes,
)
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


SEEDS = range(50)


def _mh_student(ex, places):
    g = ex.given
    d_v = g["V1"].shape[1]
    G_concat = round_half_up(g["G_out"] @ g["W_O"].T, places)
    answer = {"G_concat": G_concat, "G_W_O": round_half_up(g["concat"].T @ g["G_out"], places),
              "G_V1": round_half_up(g["A1"].T @ G_concat[:, :d_v], places)}
    for p in ex.parts:
        if p.name.startswith("G_O"):
            i = int(p.name[3:])
            answer[p.name] = G_concat[:, (i - 1) * d_v:i * d_v]
    return answer


@pytest.mark.parametrize("seed", range(20))
def test_multi_head_output_backward_matches_finite_differences(seed):
    from attention_core.multi_head import head_output_backward, output_projection_backward, split_heads

    rng = np.random.default_rng(seed)
    n, h, d_v, d_out = (int(rng.integers(2, 5)) for _ in range(4))
    A = [softmax(rng.normal(size=(n, n))) for _ in range(h)]
    V = [rng.normal(size=(n, d_v)) for _ in range(h)]
    W_O, G_out = rng.normal(size=(h * d_v, d_out)), rng.normal(size=(n, d_out))

    def loss(V1, W):
        concat = np.concatenate([A[0] @ V1] + [a @ v for a, v in zip(A[1:], V[1:])], axis=1)
        return np.sum((concat @ W) * G_out)

    concat = np.concatenate([a @ v for a, v in zip(A, V)], axis=1)
    G_concat, G_W_O = output_projection_backward(concat, W_O, G_out)
    np.testing.assert_allclose(G_W_O, central_difference(lambda W: loss(V[0], W), W_O).reshape(W_O.shape),
                               atol=1e-7)
    np.testing.assert_allclose(G_concat, central_difference(lambda C: np.sum((C @ W_O) * G_out), concat)
                               .reshape(concat.shape), atol=1e-7)
    G_O1 = split_heads(G_concat, [d_v] * h)[0]
    G_V1 = head_output_backward(A[0], V[0], G_O1)[1]
    np.testing.assert_allclose(G_V1, central_difference(lambda v: loss(v, W_O), V[0]).reshape(V[0].shape), atol=1e-7)


@pytest.mark.parametrize("level", (1, 2, 3))
def test_grad_multi_head_references_are_numpy_s_and_the_given_heads_agree(level):
    for seed in SEEDS:
        ex = exercises.generate("grad_multi_head", seed, level)
        g = ex.given
        h = sum(1 for k in g if k.startswith("A") and k[1:].isdigit())
        np.testing.assert_allclose(g["concat"], np.hstack([g[f"A{i}"] @ g[f"V{i}"] for i in range(1, h + 1)]))
        np.testing.assert_allclose(g["A1"].sum(axis=1), 1)
        G_concat = g["G_out"] @ g["W_O"].T
        d_v = g["V1"].shape[1]
        np.testing.assert_allclose(ex.part("G_concat").reference, G_concat)
        np.testing.assert_allclose(ex.part("G_W_O").reference, g["concat"].T @ g["G_out"])
        for i in range(1, h + 1):
            np.testing.assert_allclose(ex.part(f"G_O{i}").reference, G_concat[:, (i - 1) * d_v:i * d_v])
        np.testing.assert_allclose(ex.part("G_V1").reference, g["A1"].T @ G_concat[:, :d_v])


@pytest.mark.parametrize("level", (1, 2, 3))
def test_grad_multi_head_careful_student_who_rounds_is_right(level):
    assert_careful_students_are_right("grad_multi_head", level, _mh_student)


@pytest.mark.parametrize("level", (1, 2, 3))
def test_grad_multi_head_mistakes_are_named_exact_and_rounded(level):
    from exercises.kinds import grad_multi_head as K

    named = named_mistakes("grad_multi_head", level, lambda ex, part: K.mistakes_of(ex.given, part))
    assert {"grad_mh_wrong_head", "grad_mh_w_o_not_summed", "grad_v_no_transpose"} <= named
    if level < 3:  # W_O is square: its transposes have the right shape
        assert {"grad_mh_concat_no_transpose", "grad_mh_skips_w_o", "grad_mh_w_o_transposed"} <= named


def test_grad_multi_head_a_wrong_g_concat_carries_into_the_heads():
    ex = exercises.generate("grad_multi_head", 0, 2)
    answer = _mh_student(ex, 2)
    G_concat = answer["G_concat"].copy()
    G_concat[0, 0] += 1
    d_v = ex.given["V1"].shape[1]
    answer = {**answer, "G_concat": G_concat, "G_O1": G_concat[:, :d_v],
              "G_V1": ex.given["A1"].T @ G_concat[:, :d_v]}
    fb = exercises.grade(ex, answer)
    assert not fb.correct
    assert (fb.parts["G_O1"].status == grading.CONSISTENT).any()
    assert (fb.parts["G_V1"].status == grading.CONSISTENT).any()
