"""gqa, grouped-query and multi-query attention: its references against an independent NumPy computation,
its catalogued mistakes named (exact and rounded), careful students graded right, every level's sizes and
conventions, the time budget, the worked solution, and exercises stored by earlier versions."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest

import exercises
import exercises.kinds.gqa as G
from attention_core import grouped_query_attention, kv_cache_floats, multi_head_attention
from attention_core.grouped import group_of
from exercises.cli import selftest
from exercises.core import budget, engine, grading
from exercises.core.numbers import round_half_up
from exercises.i18n import catalog
from tests.kinds.common import graded_right
from tests.stored_exercise import still_shows_and_grades

LEVELS = (1, 2, 3)
SEEDS = range(30)
MISTAKE_SEEDS = 8  # of SEEDS per level: each wrong answer is graded twice (exact, rounded)
STORED = json.loads((Path(__file__).parent / "stored" / "gqa.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def drawn() -> dict[int, list]:
    """The exercises of each level, generated once for the whole module."""
    return {level: [exercises.generate("gqa", seed, level) for seed in SEEDS] for level in LEVELS}


def case(ex) -> str:
    return f"gqa level {ex.level} seed {ex.seed}"


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
    if "concat" in ex.part_names:
        out["concat"] = np.hstack([out[f"O{i + 1}"] for i in range(h)])
    out["cache_floats"] = ex.part("cache_floats").reference
    return out


# ---------------------------------------------------------------- what the kind teaches


@pytest.mark.parametrize("seed", range(20))
def test_grouped_attention_is_multi_head_with_repeated_keys_and_values(seed):
    """GQA = multi-head attention whose head i uses group ⌊i / (h/g)⌋'s W_K and W_V (repeat_interleave);
    g = h is multi-head, g = 1 multi-query."""
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
    assert list(tr.group) == repeated == [group_of(i, h, g) for i in range(h)], f"seed {seed}"
    mha = multi_head_attention(X, W_Q, [W_K[j] for j in repeated], [W_V[j] for j in repeated], causal=causal)
    np.testing.assert_allclose(tr.concat, mha.concat, atol=1e-12, err_msg=f"seed {seed}")
    assert kv_cache_floats(g, d_k) == 2 * g * d_k and kv_cache_floats(h, d_k) == 2 * h * d_k


def test_groups_must_divide_heads():
    with pytest.raises(ValueError):
        group_of(0, 4, 3)
    X = np.ones((2, 2))
    with pytest.raises(ValueError):
        grouped_query_attention(X, [np.eye(2)] * 4, [np.eye(2)] * 3, [np.eye(2)] * 3)


# ---------------------------------------------------------------- references and levels


@pytest.mark.parametrize("level", LEVELS)
def test_references_match_an_independent_computation(drawn, level):
    for ex in drawn[level]:
        h, g = sizes(ex)
        d_k = int(ex.given["d_k"])
        heads = [attend(*head_inputs(ex, i), d_k) for i in range(h)]
        for i, O in enumerate(heads, start=1):
            np.testing.assert_allclose(ex.part(f"O{i}").reference, O, atol=1e-12, err_msg=f"{case(ex)} O{i}")
        if "concat" in ex.part_names:
            np.testing.assert_allclose(ex.part("concat").reference, np.hstack(heads), atol=1e-12, err_msg=case(ex))
        d_v = ex.given["W_V1"].shape[1]
        assert ex.part("cache_floats").reference[0, 0] == g * (d_k + d_v) == 2 * g * d_k, case(ex)
        assert ex.part("cache_floats").decimals == 0, case(ex)


def test_levels_are_multi_query_then_grouped_and_causal(drawn):
    """The conventions the prompts state: level 1 multi-query (h = 2, g = 1), levels 2 and 3 grouped
    (h = 4, g = 2), level 3 with d_k = 2; two tokens of width 2 (level 1: X = I), causal at every level;
    weights of −1, 0, 1 (level 1: −2 … 2); the given data named per head and per group."""
    for level, (h, g, d_k) in {1: (2, 1, 1), 2: (4, 2, 1), 3: (4, 2, 2)}.items():
        for ex in drawn[level]:
            names = {"X", "groups", "d_k", "causal", *(f"W_Q{i}" for i in range(1, h + 1)),
                     *(f"W_{w}{j}" for w in "KV" for j in range(1, g + 1))}
            assert set(ex.given) == names, case(ex)
            assert np.shape(ex.given["X"]) == (2, 2), case(ex)
            assert sizes(ex) == (h, g) and ex.given["d_k"] == d_k and ex.given["causal"] is True, case(ex)
            concat = ["concat"] if level >= G.CONCAT_FROM else []  # level 1: the heads and the cache
            assert [p.name for p in ex.parts] == [*(f"O{i}" for i in range(1, h + 1)), *concat, "cache_floats"]
            values = set(G.HEAD_VALUES.get(level, G.WEIGHT_VALUES))
            assert all(set(np.unique(v)) <= values for k, v in ex.given.items() if k.startswith("W_")), case(ex)
            assert (level in G.IDENTITY_X) == np.array_equal(ex.given["X"], np.eye(2)), case(ex)  # Q, K, V read off
            text, zh = engine.prompt(ex), engine.prompt(ex, "zh")
            assert "causal" in text and "因果" in zh, case(ex)
            assert ("Multi-query" in text) == (g == 1) and ("多查询" in zh) == (g == 1), case(ex)
            if g > 1:
                assert "1, 2 → 1; 3, 4 → 2" in text and "1, 2 → 1; 3, 4 → 2" in zh, case(ex)
            assert f"d_v = {d_k}" in text and "cache_floats" in text, case(ex)


@pytest.mark.parametrize("level", LEVELS)
def test_the_heads_and_groups_differ(drawn, level):
    """Groups unlike each other (nor each other's negative), the heads of a group querying differently,
    every head's scores small and not symmetric with a nonzero hidden score, the heads' outputs apart."""
    for ex in drawn[level]:
        h, g = sizes(ex)
        X = np.asarray(ex.given["X"], dtype=float)
        K = [X @ ex.given[f"W_K{j}"] for j in range(1, g + 1)]
        for a in range(g):
            for b in range(a + 1, g):
                assert not np.array_equal(K[a], K[b]) and not np.array_equal(K[a], -K[b]), case(ex)
        for i in range(h):
            Q, K_i, _ = head_inputs(ex, i)
            S = Q @ K_i.T
            assert np.abs(S).max() <= G.MAX_SCORE and not np.array_equal(S, S.T) and S[0, 1] != 0, (case(ex), i)
        heads = [ex.part(f"O{i}").reference for i in range(1, h + 1)]
        for a in range(h):
            for b in range(a + 1, h):
                assert np.abs(heads[a] - heads[b]).max() > 0.01, (case(ex), a, b)


@pytest.mark.parametrize("level", LEVELS)
def test_the_givens_stay_varied(level):
    """Over 100 seeds at least 90 % distinct given data."""
    seen = {json.dumps({k: np.asarray(v).tolist() for k, v in sorted(ex.given.items())})
            for ex in (exercises.generate("gqa", seed, level) for seed in range(100))}
    assert len(seen) >= 90, f"gqa level {level}: {len(seen)} distinct of 100"


@pytest.mark.parametrize("level", LEVELS)
def test_every_exercise_fits_its_time_budget(drawn, level):
    for ex in drawn[level]:
        assert engine.minutes(ex) <= budget.BUDGET_MINUTES[level], case(ex)
        # the count is the kind's own: every cell asked and every value on the way written, K and V once per
        # group, not once per head
        ops = engine.operations(ex)
        assert ops.cells > sum(int(np.prod(p.shape)) for p in ex.parts), case(ex)
        h, g = sizes(ex)
        every_head_its_own = budget.Operations()  # as multi-head attention would: K and V in every head
        for i in range(1, h + 1):
            j = G.group(i, h, g)
            one = {"X": ex.given["X"], "W_Q": ex.given[f"W_Q{i}"], "W_K": ex.given[f"W_K{j}"],
                   "W_V": ex.given[f"W_V{j}"], "d_k": ex.given["d_k"], "causal": True}
            every_head_its_own = every_head_its_own + budget.count(one, ["O"], written=())
        assert ops.seconds < every_head_its_own.seconds + budget.RATES["cells"] * ops.cells, case(ex)


# ---------------------------------------------------------------- grading


@pytest.mark.parametrize("level", LEVELS)
def test_careful_students_are_right(drawn, level):
    for ex in drawn[level]:
        for places in (2, 3, None):
            assert graded_right(ex, student(ex, places)), (case(ex), places)


@pytest.mark.parametrize("level", LEVELS)
def test_selftest_right_wrong_and_unreadable_answers(drawn, level):
    for ex in drawn[level]:
        rng = np.random.default_rng(ex.seed)
        right = exercises.grade(ex, selftest.correct_answer(ex))
        assert right.correct and right.score == 1.0 and right.misconception is None, case(ex)
        wrong = exercises.grade(ex, selftest.incorrect_answer(ex, rng))
        assert wrong.graded and not wrong.correct and wrong.score < 1.0, case(ex)
        invalid = exercises.grade(ex, selftest.invalid_answer(ex, rng))
        assert invalid.score is None and any(p.format_error for p in invalid.parts.values()), case(ex)


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
    if "concat" in ex.part_names:
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
                    assert not fb.correct and fb.parts[part].misconception == mid, (case(ex), part, mid)
                named.add(mid)
    expected = {"transposed_scores", "no_mask", "gqa_cache_full_heads", "gqa_cache_keys_only"}
    if level >= G.CONCAT_FROM:
        expected.add("concat_order")
    if level > 1:
        expected |= {"gqa_wrong_group", "gqa_v_not_shared"}
    if level == 3:
        expected |= {"no_scaling", "scaled_by_dk"}
    assert expected <= named, f"gqa level {level}: {expected - named} never named"


@pytest.mark.parametrize("level", LEVELS)
def test_every_guarded_mistake_is_named_in_every_head(drawn, level):
    """Each guarded mistake of the records, made in one head (that head's pipeline run alone), is named."""
    from exercises.core import pipeline

    for ex in drawn[level][:3]:
        h, _ = sizes(ex)
        for i in range(1, h + 1):
            one = G.head_given(ex.given, i)
            reference = pipeline.run(one)["O"]
            for mid in G.GUARDS:
                wrong = pipeline.run(one, mistakes={mid})
                if mid not in wrong.used or np.isnan(wrong["O"]).any():
                    continue
                fb = exercises.grade(ex, {**answers(ex), f"O{i}": round_half_up(wrong["O"], 2)})
                assert fb.parts[f"O{i}"].misconception == mid, (case(ex), i, mid)
                assert np.abs(wrong["O"] - reference).max() > 0.01, (case(ex), i, mid)


@pytest.mark.parametrize("level", LEVELS)
def test_every_heads_mistakes_stay_apart_computed_head_by_head(drawn, level):
    """What the sampler decides on the stack, decided again one head at a time: each head's guarded mistakes
    (its own pipeline run) and the kind's own (recomputed here) lie apart from its answer and from each other."""
    from exercises.core import misconceptions, pipeline

    for ex in drawn[level]:
        ours = own_mistakes(ex)
        for i in range(1, sizes(ex)[0] + 1):
            part = ex.part(f"O{i}")
            alts = {mid: value for mid, value in ours[part.name].items() if mid.startswith("gqa_")}
            for mid in G.GUARDS:
                wrong = pipeline.run(G.head_given(ex.given, i), mistakes={mid})
                if mid in wrong.used and np.isfinite(wrong["O"]).all():
                    alts[mid] = wrong["O"]
            assert not misconceptions.clashes(part.reference, alts, misconceptions.separation(part)), (case(ex), i)


def test_the_wrong_group_differs_from_the_right_one_where_it_should():
    """h = 4, g = 2: ⌊i / 2⌋ gives groups 0, 0, 1, 1 and i mod 2 gives 0, 1, 0, 1: heads 2 and 3 (1-based)
    differ, so the mistake is catalogued for them and never for heads 1 and 4."""
    ex = exercises.generate("gqa", 0, 2)
    found = G.mistakes_of(ex)
    for i, expected in ((1, False), (2, True), (3, True), (4, False)):
        assert ("gqa_wrong_group" in found[f"O{i}"]) is expected, f"{case(ex)} O{i}"
        assert ("gqa_v_not_shared" in found[f"O{i}"]) is (i > 2), f"{case(ex)} O{i}"
    assert [G.group(i, 4, 2) for i in (1, 2, 3, 4)] == [1, 1, 2, 2]


def test_every_wrong_order_of_the_heads_is_named(drawn):
    for ex in drawn[2][:2]:
        heads = [ex.part(f"O{i}").reference for i in range(1, 5)]
        for order in permutations(range(4)):
            if order != (0, 1, 2, 3):
                wrong = round_half_up(np.hstack([heads[k] for k in order]), 2)
                got = exercises.grade(ex, {**answers(ex), "concat": wrong}).parts["concat"].misconception
                assert got == "concat_order", (case(ex), order)


def test_a_wrong_head_carries_into_the_concatenation():
    ex = exercises.generate("gqa", 0, 2)
    answer = student(ex, 2)
    answer["O2"] = answer["O2"] + 1
    answer["concat"] = np.hstack([answer[f"O{i}"] for i in range(1, 5)])
    fb = exercises.grade(ex, answer)
    assert not fb.correct and (fb.parts["concat"].status == grading.CONSISTENT).any(), case(ex)
    assert fb.parts["O1"].correct and fb.parts["cache_floats"].correct, case(ex)


# ---------------------------------------------------------------- solution and exports


def test_the_solution_computes_each_group_once_and_compares_the_cache_with_multi_head():
    ex = exercises.generate("gqa", 0, 3)
    steps = exercises.solve(ex)
    names = [s.name for s in steps]
    assert names.count("K1") == names.count("K2") == 1 and "K3" not in names, case(ex)
    assert names[-2:] == ["concat", "cache_floats"], case(ex)
    scores3 = next(s for s in steps if s.name == "scores3")
    assert r"K^{[2]}" in scores3.display(exact=True), case(ex)  # head 3 reads group 2's keys
    note = next(s for s in steps if s.name == "cache_floats").note.render()
    assert "16" in note and "2 times" in note, case(ex)  # multi-head: 4 · (2 + 2) = 16, against 2 · (2 + 2) = 8
    for part in ex.parts:
        assert np.allclose(next(s.value for s in steps if s.name == part.name), part.reference), (case(ex), part.name)


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
        assert "cache_floats" in text and "\\begin{bmatrix}" in text, case(ex)
        fb = grading.grade(ex, _cloze_answers(ex, text))
        assert fb.graded and fb.score == 1.0, (case(ex), fb.message)


# ---------------------------------------------------------------- exercises stored by earlier versions


@pytest.mark.parametrize("stored", STORED, ids=lambda d: f"version{d['version']}-level{d['level']}-seed{d['seed']}")
def test_a_stored_exercise_still_shows_solves_and_grades(stored):
    """Exercises made by earlier VERSIONs (stored with their given data and parts) show, solve and grade as
    their students saw them; each is no longer what today's generator makes for its seed."""
    ex = exercises.Exercise.from_dict(stored)
    where = f"gqa version {ex.version} level {ex.level} seed {ex.seed}"
    assert ex.version < G.VERSION, where
    today = exercises.generate("gqa", ex.seed, ex.level).to_dict()
    assert (today["given"], [p["name"] for p in today["parts"]]) != (stored["given"], ex.part_names), where
    steps = still_shows_and_grades(ex)
    for part in ex.parts:  # the worked solution still computes what the students were asked
        assert np.allclose(next(s.value for s in steps if s.name == part.name), part.reference), (where, part.name)
    assert graded_right(ex, student(ex, 2)), where


def test_the_wrong_group_text_counts_heads_and_groups_from_one():
    """Heads and groups are numbered from 1: dealt out in turn, head i goes to group ((i − 1) mod g) + 1."""
    for lang in ("en", "zh"):
        text = catalog(lang)["misconception.gqa_wrong_group"]
        assert "((i − 1) mod g) + 1" in text and "i mod g）" not in text and "i mod g)" not in text, (lang, text)


@pytest.mark.parametrize("level", G.LEVELS)
def test_the_concatenation_names_exactly_the_heads_there_are(level):
    for seed in range(10):
        ex = exercises.generate("gqa", seed, level)
        h, _ = G.sizes_of(ex.given)
        for lang in ("en", "zh"):
            text = engine.prompt(ex, lang)
            want = "[O1 | O2]" if h == 2 else f"[O1 | O2 | … | O{h}]"
            if "concat" not in ex.part_names:  # level 1 does not ask it: the prompt does not either
                assert "[O1" not in text and text.rstrip()[-1] in ".。", f"gqa level {level} seed {seed} ({lang}): {text}"
                continue
            assert want in text and "[O1 | … | O2]" not in text, f"gqa level {level} seed {seed} ({lang}): {text}"
