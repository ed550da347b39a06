"""Issue 17 (W17d): gqa, grouped-query and multi-query attention, tests itself beyond the registry-wide
tests (which iterate exercises.KINDS): references against an independent NumPy computation over 50
seeds per level; every named mistake recomputed here and diagnosed, exactly and rounded to 2 places; a
careful student who rounds graded right; the grouping property (GQA is multi-head attention with each
group's K and V repeated to its heads); the stated conventions; the time budgets."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import permutations

import numpy as np
import pytest

import exercises
from attention_core import grouped_query_attention, kv_cache_floats, multi_head_attention
from attention_core.grouped import group_of
from exercises.core import budget, engine, grading
from exercises.core.numbers import round_half_up

SEEDS = range(50)
MISTAKE_SEEDS = 10  # of the 50 per level: each wrong answer is graded twice (exact, rounded), ~70 per exercise
LEVELS = (1, 2, 3)


@pytest.fixture(scope="module")
def drawn() -> dict[int, list]:
    """The 50 exercises of each level, generated once for the whole module."""
    return {level: [exercises.generate("gqa", seed, level) for seed in SEEDS] for level in LEVELS}


def sizes(ex) -> tuple[int, int]:
    return sum(1 for k in ex.given if k.startswith("W_Q")), int(ex.given["groups"])


def head_inputs(ex, i: int, k_group: int | None = None, v_group: int | None = None):
    """Q, K, V of head i (0-based), written out again: consecutive heads share a group."""
    h, g = sizes(ex)
    right = i // (h // g)
    X = np.asarray(ex.given["X"], dtype=float)
    Q = X @ ex.given[f"W_Q{i + 1}"]
    K = X @ ex.given[f"W_K{(right if k_group is None else k_group) + 1}"]
    V = X @ ex.given[f"W_V{(right if v_group is None else v_group) + 1}"]
    return Q, K, V


def attend(Q, K, V, d_k, places=None, scale=None, mask=True):
    """Causal attention as a student writes it: each value rounded to `places` (None: exact)."""
    r = (lambda M: M) if places is None else (lambda M: round_half_up(M, places))
    n = Q.shape[0]
    Z = r(r(Q @ K.T) / (np.sqrt(d_k) if scale is None else scale))  # (n, n)
    if mask:
        Z = np.where(np.triu(np.ones((n, n), dtype=bool), k=1), -np.inf, Z)
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    A = r(E / E.sum(axis=1, keepdims=True))  # (n, n)
    return r(A @ V)  # (n, d_v)


def answers(ex) -> dict[str, np.ndarray]:
    return {p.name: np.array(p.reference) for p in ex.parts}


def student(ex, places):
    """A careful student: every value rounded as written, computed on from what was written."""
    h, _ = sizes(ex)
    d_k = int(ex.given["d_k"])
    out = {f"O{i + 1}": attend(*head_inputs(ex, i), d_k, places) for i in range(h)}
    out["concat"] = np.hstack([out[f"O{i + 1}"] for i in range(h)])
    out["cache_floats"] = ex.part("cache_floats").reference
    return out


def graded_right(ex, answer) -> bool:
    fb = exercises.grade(ex, answer)
    return fb.correct and fb.score == 1.0 and all((p.status == grading.RIGHT).all() for p in fb.parts.values())


# ---------------------------------------------------------------- the reference


@pytest.mark.parametrize("seed", range(20))
def test_grouped_attention_is_multi_head_with_repeated_keys_and_values(seed):
    """The property the kind teaches: GQA = multi-head attention whose head i uses group ⌊i / (h/g)⌋'s
    W_K and W_V (repeat_interleave); g = h is multi-head, g = 1 multi-query."""
    rng = np.random.default_rng(seed)
    g = int(rng.integers(1, 4))
    h = g * int(rng.integers(1, 4))
    n, d, d_k = (int(rng.integers(1, 5)) for _ in range(3))
    X = rng.normal(size=(n, d))
    W_Q = [rng.normal(size=(d, d_k)) for _ in range(h)]
    W_K = [rng.normal(size=(d, d_k)) for _ in range(g)]
    W_V = [rng.normal(size=(d, d_k)) for _ in range(g)]
    causal = bool(seed % 2)
    tr = grouped_query_attention(X, W_Q, W_K, W_V, causal=causal)
    repeated = [i * g // h for i in range(h)]  # ⌊i / (h/g)⌋ written another way
    assert list(tr.group) == repeated == [group_of(i, h, g) for i in range(h)]
    mha = multi_head_attention(X, W_Q, [W_K[j] for j in repeated], [W_V[j] for j in repeated], causal=causal)
    np.testing.assert_allclose(tr.concat, mha.concat, atol=1e-12)
    assert kv_cache_floats(g, d_k) == 2 * g * d_k and kv_cache_floats(h, d_k) == 2 * h * d_k


def test_groups_must_divide_heads():
    with pytest.raises(ValueError):
        group_of(0, 4, 3)
    X = np.ones((2, 2))
    with pytest.raises(ValueError):
        grouped_query_attention(X, [np.eye(2)] * 4, [np.eye(2)] * 3, [np.eye(2)] * 3)


@pytest.mark.parametrize("level", LEVELS)
def test_references_match_numpy_over_50_seeds(drawn, level):
    for ex in drawn[level]:
        h, g = sizes(ex)
        d_k = int(ex.given["d_k"])
        heads = [attend(*head_inputs(ex, i), d_k) for i in range(h)]
        for i, O in enumerate(heads, start=1):
            np.testing.assert_allclose(ex.part(f"O{i}").reference, O, atol=1e-12, err_msg=ex.id)
        np.testing.assert_allclose(ex.part("concat").reference, np.hstack(heads), atol=1e-12)
        d_v = ex.given["W_V1"].shape[1]
        assert ex.part("cache_floats").reference[0, 0] == g * (d_k + d_v) == 2 * g * d_k  # d_v = d_k
        assert ex.part("cache_floats").decimals == 0


def test_levels_are_multi_query_then_grouped_and_causal(drawn):
    """The conventions the prompts state: level 1 multi-query (h = 2, g = 1), levels 2 and 3 grouped
    (h = 4, g = 2), level 3 with d_k = 2; causal at every level; weights of −1, 0, 1."""
    for level, (h, g, d_k) in {1: (2, 1, 1), 2: (4, 2, 1), 3: (4, 2, 2)}.items():
        for ex in drawn[level]:
            assert sizes(ex) == (h, g) and ex.given["d_k"] == d_k and ex.given["causal"] is True
            assert all(set(np.unique(v)) <= {-1, 0, 1} for k, v in ex.given.items() if k.startswith("W_"))
            text, zh = engine.prompt(ex), engine.prompt(ex, "zh")
            assert "causal" in text and "因果" in zh
            assert ("Multi-query" in text) == (g == 1) and ("多查询" in zh) == (g == 1)
            if g > 1:
                assert "1, 2 → 1; 3, 4 → 2" in text and "1, 2 → 1; 3, 4 → 2" in zh
            assert f"d_v = {d_k}" in text and "cache_floats" in text


@pytest.mark.parametrize("level", LEVELS)
def test_every_exercise_fits_its_time_budget(drawn, level):
    for ex in drawn[level]:
        assert engine.minutes(ex) <= budget.BUDGET_MINUTES[level], ex.id
    # the count is the kind's own: K and V once per group, not once per head
    ex = drawn[level][0]
    h, g = sizes(ex)
    assert engine.operations(ex).cells == sum(int(np.prod(p.shape)) for p in ex.parts)


# ---------------------------------------------------------------- grading


@pytest.mark.parametrize("level", LEVELS)
def test_careful_student_who_rounds_is_right(drawn, level):
    for ex in drawn[level]:
        for places in (2, 3, None):
            assert graded_right(ex, student(ex, places)), (ex.id, places)


def own_mistakes(ex) -> dict[str, dict[str, np.ndarray]]:
    """{part: {mistake id: value}}, recomputed here (not with the kind's code)."""
    h, g = sizes(ex)
    d_k = int(ex.given["d_k"])
    share = h // g
    found: dict[str, dict[str, np.ndarray]] = {}
    for i in range(h):
        Q, K, V = head_inputs(ex, i)
        alts = {"transposed_scores": attend(K, Q, V, d_k), "no_mask": attend(Q, K, V, d_k, mask=False)}
        if d_k > 1:
            alts["no_scaling"] = attend(Q, K, V, d_k, scale=1.0)
            alts["scaled_by_dk"] = attend(Q, K, V, d_k, scale=float(d_k))
        if i % g != i // share:  # dealt out in turn instead of consecutive heads
            alts["gqa_wrong_group"] = attend(*head_inputs(ex, i, i % g, i % g), d_k)
        if i // share != 0:
            alts["gqa_v_not_shared"] = attend(*head_inputs(ex, i, v_group=0), d_k)
        found[f"O{i + 1}"] = alts
    heads = [ex.part(f"O{i + 1}").reference for i in range(h)]
    found["concat"] = {"concat_order": np.hstack(heads[::-1])}
    d_v = ex.given["W_V1"].shape[1]
    found["cache_floats"] = {"gqa_cache_full_heads": np.array([[h * (d_k + d_v)]], dtype=float),
                             "gqa_cache_keys_only": np.array([[g * d_k]], dtype=float)}
    return found


@pytest.mark.parametrize("level", LEVELS)
def test_every_named_mistake_is_diagnosed_exact_and_rounded(drawn, level):
    named: set[str] = set()
    for ex in drawn[level][:MISTAKE_SEEDS]:
        right = answers(ex)
        for part, alts in own_mistakes(ex).items():
            for mid, alt in alts.items():
                for shown in (alt, round_half_up(alt, 2)):
                    fb = exercises.grade(ex, {**right, part: shown})
                    assert not fb.correct and fb.parts[part].misconception == mid, (ex.id, part, mid)
                named.add(mid)
    expected = {"transposed_scores", "no_mask", "concat_order", "gqa_cache_full_heads", "gqa_cache_keys_only"}
    if level > 1:
        expected |= {"gqa_wrong_group", "gqa_v_not_shared"}
    if level == 3:
        expected |= {"no_scaling", "scaled_by_dk"}
    assert expected <= named


def test_the_wrong_group_differs_from_the_right_one_where_it_should():
    """h = 4, g = 2: ⌊i / 2⌋ gives groups 0, 0, 1, 1 and i mod 2 gives 0, 1, 0, 1: heads 2 and 3 (1-based)
    differ, so the mistake is catalogued for them and never for heads 1 and 4."""
    from exercises.kinds import gqa

    ex = exercises.generate("gqa", 0, 2)
    for i, expected in ((1, False), (2, True), (3, True), (4, False)):
        assert ("gqa_wrong_group" in gqa.mistakes_of(ex.given, f"O{i}")) is expected
        assert ("gqa_v_not_shared" in gqa.mistakes_of(ex.given, f"O{i}")) is (i > 2)
    assert [gqa.group(i, 4, 2) for i in (1, 2, 3, 4)] == [1, 1, 2, 2]


def test_every_wrong_order_of_the_heads_is_named(drawn):
    for ex in drawn[2][:2]:
        heads = [ex.part(f"O{i}").reference for i in range(1, 5)]
        for order in permutations(range(4)):
            if order != (0, 1, 2, 3):
                wrong = round_half_up(np.hstack([heads[k] for k in order]), 2)
                assert exercises.grade(ex, {**answers(ex), "concat": wrong}).parts["concat"].misconception \
                    == "concat_order"


def test_a_wrong_head_carries_into_the_concatenation():
    ex = exercises.generate("gqa", 0, 2)
    answer = student(ex, 2)
    answer["O2"] = answer["O2"] + 1
    answer["concat"] = np.hstack([answer[f"O{i}"] for i in range(1, 5)])
    fb = exercises.grade(ex, answer)
    assert not fb.correct and (fb.parts["concat"].status == grading.CONSISTENT).any()
    assert fb.parts["O1"].correct and fb.parts["cache_floats"].correct


def test_the_solution_computes_each_group_once_and_compares_the_cache_with_multi_head():
    ex = exercises.generate("gqa", 0, 3)
    steps = exercises.solve(ex)
    names = [s.name for s in steps]
    assert names.count("K1") == names.count("K2") == 1 and "K3" not in names
    assert names[-2:] == ["concat", "cache_floats"]
    scores3 = next(s for s in steps if s.name == "scores3")
    assert r"K^{[2]}" in scores3.display(exact=True)  # head 3 reads group 2's keys
    note = next(s for s in steps if s.name == "cache_floats").note.render()
    assert "16" in note and "2 times" in note  # multi-head: 4 · (2 + 2) = 16, against 2 · (2 + 2) = 8


def test_moodle_export_reads_back_through_the_grader(drawn):
    """Each cell a Cloze sub-question with the grader's tolerance; the right values typed into the boxes
    (rounded as the export allows) grade 1.0."""
    from exercises.worksheets import moodle
    from tests.test_exports import _cloze_answers

    exs = [ex for level in LEVELS for ex in drawn[level][:2]]
    root = ET.fromstring(moodle.to_xml("GQA", None, [(None, exs)]))
    questions = [q for q in root if q.get("type") == "cloze"]
    assert len(questions) == len(exs)
    for q, ex in zip(questions, exs):
        text = q.find("questiontext/text").text
        assert "cache_floats" in text and "\\begin{bmatrix}" in text
        fb = grading.grade(ex, _cloze_answers(ex, text))
        assert fb.graded and fb.score == 1.0, (ex.id, fb.message)
