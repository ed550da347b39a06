"""The KV cache kind: its references against plain NumPy, the property its solution states (the new
token's output is the last row of full causal attention), every mistake named exactly and rounded, a
careful student who rounds graded right, each level's sizes and minutes, and exercises stored by
earlier versions still showing and grading."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import exercises
from attention_core import scaled_dot_product
from attention_core.kv_cache import cache_floats, decode_step
from exercises import solutions
from exercises.core import budget, engine, grading
from exercises.core.numbers import round_half_up
from exercises.kinds import kv_cache as KV
from tests import generated
from tests.stored_exercise import still_shows_and_grades

SEEDS = range(30)
LEVELS = KV.LEVELS
GRADED = 5  # seeds whose named mistakes go through the whole grader (the others through the kind's hook)
STORED = json.loads((Path(__file__).parent / "stored" / "kv_cache.json").read_text())


def _case(ex) -> str:
    return f"kv_cache level {ex.level} seed {ex.seed}"


def _softmax_row(z: np.ndarray) -> np.ndarray:
    """e^z over the row's sum, written out again (not attention_core's)."""
    e = np.exp(z - z.max())
    return e / e.sum()


def _numpy_step(g: dict, params: dict) -> dict[str, np.ndarray]:
    """The decoding step by plain NumPy, from the given rows."""
    K = np.concatenate([g["K_cache"], g["k"]], axis=0)
    V = np.concatenate([g["V_cache"], g["v"]], axis=0)
    s = np.array([[float(np.dot(g["q"][0], K[j])) for j in range(K.shape[0])]])
    a = _softmax_row(s / math.sqrt(g["d_k"]))
    o = np.array([[sum(a[0, j] * V[j, c] for j in range(V.shape[0])) for c in range(V.shape[1])]])
    size = 2 * params["layers"] * params["heads"] * (g["K_cache"].shape[0] + 1) * params["d_head"]
    return {"K": K, "V": V, "scores": s, "A": a, "O": o, "cache_floats": np.array([[size]])}


def _graded_right(ex, answer) -> bool:
    fb = exercises.grade(ex, answer)
    return fb.correct and fb.score == 1.0 and all((p.status == grading.RIGHT).all() for p in fb.parts.values())


def _careful(ex, places: int | None) -> dict[str, np.ndarray]:
    """A student who rounds every value they write (and the unasked s/√d_k) and computes on from it."""
    g = ex.given
    K = np.concatenate([g["K_cache"], g["k"]])
    V = np.concatenate([g["V_cache"], g["v"]])
    s = g["q"] @ K.T
    z = round_half_up(s / math.sqrt(g["d_k"]), places)
    a = round_half_up(_softmax_row(z), places)
    o = round_half_up(a @ V, places)
    p = ex.params
    return {"K": K, "V": V, "scores": s, "A": a, "O": o,
            "cache_floats": np.array([[2 * p["layers"] * p["heads"] * p["t1"] * p["d_head"]]])}


@pytest.mark.parametrize("level", LEVELS)
def test_references_are_plain_numpy_and_the_last_row_of_causal_attention(level):
    """Any queries for the t earlier tokens: causal attention over all t+1 rows has the new token's
    output as its last row (the mask row of the last position hides nothing)."""
    rng = np.random.default_rng(level)
    for seed in SEEDS:
        ex = generated.exercise("kv_cache", seed, level)
        expected = _numpy_step(ex.given, ex.params)
        assert ex.part_names == ["K", "V", "scores", "A", "O", "cache_floats"], _case(ex)
        for name, value in expected.items():
            np.testing.assert_allclose(ex.part(name).reference, value, atol=1e-12, err_msg=f"{_case(ex)} {name}")
        assert ex.part("cache_floats").decimals == ex.part("K").decimals == 0, _case(ex)  # whole numbers, exact
        g = ex.given
        t, d_k = g["K_cache"].shape
        Q = np.concatenate([rng.integers(-2, 3, size=(t, d_k)).astype(float), g["q"]], axis=0)  # (t+1, d_k)
        full = scaled_dot_product(Q, ex.part("K").reference, ex.part("V").reference, causal=True)
        np.testing.assert_allclose(full.O[-1:], ex.part("O").reference, atol=1e-12, err_msg=_case(ex))
        np.testing.assert_allclose(full.A[-1:], ex.part("A").reference, atol=1e-12, err_msg=_case(ex))


def test_decode_step_reference_function():
    K_cache, V_cache = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0], [3.0]])
    step = decode_step(K_cache, V_cache, q=[[1.0, 1.0]], k=[[1.0, 1.0]], v=[[5.0]], d_k=2)
    np.testing.assert_array_equal(step.K, [[1, 0], [0, 1], [1, 1]])
    np.testing.assert_array_equal(step.V, [[1], [3], [5]])
    np.testing.assert_array_equal(step.scores, [[1, 1, 2]])
    e = np.exp(np.array([1, 1, 2]) / math.sqrt(2))
    np.testing.assert_allclose(step.A, [e / e.sum()], atol=1e-15)
    np.testing.assert_allclose(step.O, [[(e @ [1, 3, 5]) / e.sum()]], atol=1e-12)
    # an empty cache: the first token attends to itself alone
    first = decode_step(np.zeros((0, 2)), np.zeros((0, 1)), q=[[1.0, 2.0]], k=[[0.0, 1.0]], v=[[4.0]])
    np.testing.assert_array_equal(first.A, [[1.0]])
    np.testing.assert_array_equal(first.O, [[4.0]])
    assert cache_floats(12, 12, 1024, 64) == 2 * 12 * 12 * 1024 * 64
    with pytest.raises(ValueError, match="one row"):
        decode_step(K_cache, V_cache, q=np.ones((2, 2)), k=[[1.0, 1.0]], v=[[1.0]])
    with pytest.raises(ValueError, match="rows"):
        decode_step(K_cache, V_cache[:1], q=[[1.0, 1.0]], k=[[1.0, 1.0]], v=[[1.0]])


@pytest.mark.parametrize("level", LEVELS)
def test_a_careful_student_who_rounds_is_right(level):
    for seed in SEEDS:
        ex = generated.exercise("kv_cache", seed, level)
        for places in (2, 3, None):
            assert _graded_right(ex, _careful(ex, places)), f"{_case(ex)}, rounding to {places}"


@pytest.mark.parametrize("level", LEVELS)
def test_every_mistake_is_named_exact_and_rounded(level):
    named = set()
    for seed in SEEDS:
        ex = generated.exercise("kv_cache", seed, level)
        right = {p.name: p.reference for p in ex.parts}
        for part in ex.parts:
            for mid, alt in KV.mistakes_of(ex, part.name).items():
                where = f"{_case(ex)} part {part.name} mistake {mid}"
                for value in (alt, round_half_up(alt, 2)):
                    if seed < GRADED:
                        fb = exercises.grade(ex, {**right, part.name: value})
                        assert not fb.correct and fb.misconception == mid, where
                    else:
                        assert not np.allclose(value, part.reference, atol=part.tolerance), where
                        assert KV.diagnose(ex, part, value) == mid, where
                named.add(mid)
    expected = {"kv_new_row_first", "kv_query_cached", "kv_new_row_masked", "kv_new_key_left_out",
                "kv_stale_value", "kv_cache_size_one_of_k_v", "kv_cache_size_before_step",
                "kv_cache_size_one_layer", "kv_cache_size_one_head", "no_exp", "softmax_no_normalise"}
    if level > 1:  # d_k = 1 at level 1: no scaling mistake can show
        expected |= {"no_scaling", "scaled_by_dk", "scaled_times_sqrt_dk"}
    assert expected <= named, f"kv_cache level {level}: never named {sorted(expected - named)}"


def test_the_mistakes_are_what_their_messages_say():
    ex = exercises.generate("kv_cache", 3, 2)
    g, p = ex.given, ex.params
    t, root = g["K_cache"].shape[0], math.sqrt(g["d_k"])
    stale_A = _softmax_row(g["q"] @ g["K_cache"].T / root)  # (1, t): the stale cache only
    A = ex.part("A").reference
    got = {name: KV.mistakes_of(ex, name) for name in ex.part_names}
    np.testing.assert_allclose(got["O"]["kv_new_key_left_out"], stale_A @ g["V_cache"], atol=1e-12)
    np.testing.assert_allclose(got["A"]["kv_new_row_masked"], np.concatenate([stale_A, [[0.0]]], axis=1), atol=1e-12)
    np.testing.assert_allclose(got["O"]["kv_stale_value"], A[:, :t] @ g["V_cache"], atol=1e-12)
    np.testing.assert_array_equal(got["K"]["kv_new_row_first"][0], g["k"][0])
    np.testing.assert_array_equal(got["K"]["kv_query_cached"][-1], g["q"][0])
    np.testing.assert_allclose(got["A"]["no_scaling"], _softmax_row(g["q"] @ ex.part("K").reference.T), atol=1e-12)
    size = ex.part("cache_floats").reference[0, 0]
    assert got["cache_floats"]["kv_cache_size_one_of_k_v"][0, 0] == size / 2
    assert got["cache_floats"]["kv_cache_size_before_step"][0, 0] == size * t / (t + 1)
    assert got["cache_floats"]["kv_cache_size_one_layer"][0, 0] == size / p["layers"]
    assert got["cache_floats"]["kv_cache_size_one_head"][0, 0] == size / p["heads"]


def test_a_wrong_k_carries_into_the_scores():
    """The new row put first in K: scores computed from that K are consistent, not right."""
    ex = exercises.generate("kv_cache", 0, 2)
    K = KV.mistakes_of(ex, "K")["kv_new_row_first"]
    answer = {**_careful(ex, 2), "K": K, "scores": ex.given["q"] @ K.T}
    fb = exercises.grade(ex, answer)
    assert not fb.correct and fb.misconception == "kv_new_row_first", _case(ex)
    assert (fb.parts["scores"].status == grading.CONSISTENT).any(), _case(ex)


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_has_its_sizes_conventions_and_minutes(level):
    ts, widths, d_v, _, _ = KV.SIZES[level]
    for seed in SEEDS:
        ex = generated.exercise("kv_cache", seed, level)
        g, p, where = ex.given, ex.params, _case(ex)
        t, d_k = g["K_cache"].shape
        assert t in ts and d_k in widths and g["V_cache"].shape == (t, d_v), where
        assert p["t"] == t and p["t1"] == t + 1 and p["d_k"] == d_k == g["d_k"] and p["heads"] != p["layers"], where
        assert ex.part("K").shape == (t + 1, d_k) and ex.part("A").shape == (1, t + 1), where
        np.testing.assert_array_equal(ex.part("K").reference[-1], g["k"][0], err_msg=where)  # appended last
        np.testing.assert_array_equal(ex.part("V").reference[-1], g["v"][0], err_msg=where)
        assert (g["q"] != 0).all() and (g["k"] != 0).all() and (g["v"] != 0).all(), where
        scaled = ex.part("scores").reference / math.sqrt(d_k)
        assert np.abs(scaled).max() <= KV.MAX_SCALED and np.ptp(scaled) > 0, where
        assert engine.minutes(ex) <= budget.BUDGET_MINUTES[level], f"{where}: {engine.minutes(ex)} minutes"
    text = engine.prompt(ex)
    assert "No mask" in text and str(p["layers"]) in text and str(p["d_head"]) in text


def test_the_solution_states_the_causal_check_and_derives_any_cell():
    ex = exercises.generate("kv_cache", 5, 3)
    steps = {s.name: s for s in solutions.solve(ex)}
    assert list(steps) == ["K", "V", "scores", "scaled", "A", "O", "check", "cache_floats"]
    for name, step in steps.items():
        rows, cols = step.value.shape
        for i in range(rows):
            for j in range(cols):
                assert step.cell(i, j).latex, f"{_case(ex)} step {name} cell ({i}, {j})"
    assert rf"_{{{ex.params['t1']}}}" in steps["check"].latex  # the last row of the full causal attention
    assert steps["cache_floats"].exact == ((str(int(ex.part("cache_floats").reference[0, 0])),),)


@pytest.mark.parametrize("stored", STORED, ids=lambda d: f"version {d['version']} level {d['level']}")
def test_an_exercise_of_an_earlier_version_still_shows_solves_and_grades(stored):
    ex = exercises.Exercise.from_dict(stored)
    assert ex.version < KV.VERSION
    still_shows_and_grades(ex)
    step = decode_step(ex.given["K_cache"], ex.given["V_cache"], ex.given["q"], ex.given["k"], ex.given["v"],
                       ex.given["d_k"])
    np.testing.assert_allclose(step.O, ex.part("O").reference, atol=1e-12, err_msg=f"stored version {ex.version}")
    right = {p.name: p.reference for p in ex.parts}
    K = KV.mistakes_of(ex, "K")["kv_new_row_first"]
    assert exercises.grade(ex, {**right, "K": K}).misconception == "kv_new_row_first"


def test_the_layers_are_not_called_n_which_counts_tokens():
    """n counts tokens everywhere else: the cache-size question calls the layers L."""
    for lang in ("en", "zh"):
        ex = exercises.generate("kv_cache", 0, 1)
        text = engine.prompt(ex, lang)
        assert f"L = {ex.params['layers']}" in text and f"n = {ex.params['layers']}" not in text, (lang, text)
        from exercises.i18n import catalog
        assert "n." not in catalog(lang)["misconception.kv_cache_size_one_layer"][-3:], lang
        assert "2 · L · h" in catalog(lang)["formulas.kv_cache.size"], lang
    step = {s.name: s for s in exercises.solve(exercises.generate("kv_cache", 0, 1))}["cache_floats"]
    assert r"2 \cdot L \cdot h" in step.cell(0, 0).latex, "kv_cache level 1 seed 0 cell cache_floats"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_scores_box_says_s_equals_q_k_transposed_like_the_text(lang):
    """The prompt asks for s = q Kᵀ (one row): the box and the sheet call the part the same, not S = Q Kᵀ."""
    from exercises.i18n import t
    from exercises.worksheets import model

    ex = exercises.generate("kv_cache", 0, 1)
    assert "s = q Kᵀ" in engine.prompt(ex, lang)
    answer = {p.name: p.reference for p in ex.parts}
    label = t(exercises.grade(ex, answer).parts["scores"].label, lang)
    assert "s = q Kᵀ" in label and "S = Q Kᵀ" not in label, ("kv_cache level 1 seed 0 part scores", lang, label)
    asks = dict((p.name, words) for p, words in model.problem(ex, 1, lang).asks)
    assert "s = q Kᵀ" in asks["scores"], ("kv_cache level 1 seed 0 part scores", lang, asks["scores"])


@pytest.mark.parametrize("level", KV.LEVELS)
def test_a_stale_cache_of_t_rows_is_named_beside_the_shape_error(level):
    """K or V of t rows (the cache without the new row), or scores and weights over the t cached keys only: still a
    shape error (nothing graded, no attempt spent), but the mistake is named and explained in both languages."""
    from exercises.i18n import t

    for seed in range(10):
        ex = generated.exercise("kv_cache", seed, level)
        g, right, case = ex.given, {p.name: p.reference for p in ex.parts}, f"kv_cache level {level} seed {seed}"
        stale_scores = g["q"] @ g["K_cache"].T
        typed = {"K": g["K_cache"], "V": g["V_cache"], "scores": stale_scores,
                 "A": np.exp(stale_scores) / np.exp(stale_scores).sum()}
        for name, value in typed.items():
            fb = exercises.grade(ex, {**right, name: value})
            part = fb.parts[name]
            assert not fb.graded and part.misconception == "kv_cache_not_appended", f"{case} part {name}"
            assert fb.misconception == "kv_cache_not_appended", f"{case} part {name}"
            for lang in ("en", "zh"):
                text = part.format_error.render(lang)
                assert t("misconception.kv_cache_not_appended", lang) in text, f"{case} part {name} ({lang})"
        other = exercises.grade(ex, {**right, "K": np.zeros((g["K_cache"].shape[0], g["K_cache"].shape[1] + 1))})
        assert other.parts["K"].misconception is None, f"{case} part K: another shape names nothing"
