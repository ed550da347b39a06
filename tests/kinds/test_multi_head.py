"""multi_head: h heads side by side, concatenated, and (level 3) projected by W_O.

Every exercise: references as attention_core computes them, the level's sizes and values, hand-friendly
heads, every part's catalogued mistakes apart (each head run alone through the pipeline, the rule of
misconceptions.clashes), within the level's minutes (each head counted alone); a head's mistake and heads
out of order are named; careful students are graded right; exercises stored at earlier versions still show
and grade; variety holds."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

import exercises
from attention_core import multi_head_attention
from exercises.cli import selftest
from exercises.core import budget, engine, misconceptions, pipeline
from exercises.i18n import catalog, t
from exercises.kinds import multi_head as K
from tests import generated
from tests.stored_exercise import still_shows_and_grades

SEEDS = range(40)
STORED = {v: json.loads((Path(__file__).parent / "stored" / f"multi_head-v{v}.json").read_text()) for v in (4, 5, 6, 7)}


def _trace(given: dict, h: int):
    weights = [[given[K.head_names(i)[k]] for i in range(1, h + 1)] for k in range(3)]  # W_Q…, W_K…, W_V…
    return multi_head_attention(given["X"], *weights, W_O=given.get("W_O"), causal=given["causal"])


def _heads_run(ex: exercises.Exercise, mistake: str | None = None) -> list[pipeline.Env]:
    """Each head run alone through the pipeline, with `mistake` made in it when given."""
    return [pipeline.run(K.head_given(ex.given, i), mistakes=() if mistake is None else {mistake})
            for i in range(1, K.head_count(ex) + 1)]


def _mistakes_by_part(ex: exercises.Exercise) -> dict[str, dict[str, np.ndarray]]:
    """{part: {mistake: its value}}: each guarded mistake made in every head (each head alone), and the heads
    concatenated in reverse order."""
    by_part: dict[str, dict[str, np.ndarray]] = {p.name: {} for p in ex.parts}
    for mid in K.GUARDS:
        runs = _heads_run(ex, mid)
        if not any("O" in run.tainted for run in runs):
            continue
        outputs = [run["O"] for run in runs]
        for i, o in enumerate(outputs, start=1):
            if np.shape(o) == ex.part(f"O{i}").shape and not np.isnan(o).any():
                by_part[f"O{i}"][mid] = o
        concat = np.concatenate(outputs, axis=1)  # (n, h·d_v)
        if not np.isnan(concat).any():
            by_part["concat"][mid] = concat
            if "out" in by_part:
                by_part["out"][mid] = concat @ ex.given["W_O"]  # (n, d)
    outputs = [ex.part(f"O{i}").reference for i in range(1, K.head_count(ex) + 1)]
    by_part["concat"]["concat_order"] = np.concatenate(outputs[::-1], axis=1)
    return by_part


@pytest.mark.parametrize("level", K.LEVELS)
def test_references_come_from_attention_core(level):
    for seed in SEEDS:
        ex, case = generated.exercise(K.ID, seed, level), (level, seed)
        h = K.head_count(ex)
        tr = _trace(ex.given, h)
        assert ex.part_names == [f"O{i}" for i in range(1, h + 1)] + ["concat"] + (["out"] if level == 3 else []), case
        for i, head in enumerate(tr.heads, start=1):
            np.testing.assert_allclose(ex.part(f"O{i}").reference, head.O, err_msg=f"{case} O{i}")
        np.testing.assert_allclose(ex.part("concat").reference, tr.concat, err_msg=f"{case} concat")
        assert ("W_O" in ex.given) == (level == 3), case
        if level == 3:
            np.testing.assert_allclose(ex.part("out").reference, tr.out, err_msg=f"{case} out")


@pytest.mark.parametrize("level", K.LEVELS)
def test_every_level_has_its_sizes_and_values(level):
    n, h, d_k, d_v, x_values, projected = K.SIZES[level]
    for seed in SEEDS:
        ex, case = generated.exercise(K.ID, seed, level), (level, seed)
        g = ex.given
        assert K.head_count(ex) == h and g["d_k"] == d_k and (d_k == 2) == (level >= 2), case
        assert ex.params == {"n": n, "h": h, "d_k": d_k, "d_v": d_v, "width": h * d_v}, case
        assert g["X"].shape == (n, K.D_MODEL) and set(np.unique(g["X"])) <= set(x_values), case
        assert (g["X"] != 0).any(axis=0).all() and (g["X"] != 0).any(axis=1).all(), case  # no zero row or column
        assert (level in K.IDENTITY_X) == np.array_equal(g["X"], np.eye(n, K.D_MODEL)), case
        assert g["causal"] == K.CAUSAL.get(level, g["causal"]), case
        values = set(K.HEAD_VALUES.get(level, (-1, 0, 1)))
        weights = [g[name] for i in range(1, h + 1) for name in K.head_names(i)]
        for W in weights + ([g["W_O"]] if projected else []):
            assert set(np.unique(W)) <= values and (W != 0).any(axis=0).all(), case  # no zero column
        for i in range(1, h + 1):
            assert g[f"W_Q{i}"].shape == g[f"W_K{i}"].shape == (K.D_MODEL, d_k), case
            assert g[f"W_V{i}"].shape == (K.D_MODEL, d_v), case
        if projected:
            assert g["W_O"].shape == (h * d_v, K.D_MODEL), case


@pytest.mark.parametrize("level", K.LEVELS)
def test_every_head_is_hand_friendly_and_the_heads_differ(level):
    for seed in SEEDS:
        ex, case = generated.exercise(K.ID, seed, level), (level, seed)
        runs = _heads_run(ex)
        causal = ex.given["causal"]
        for i, run in enumerate(runs, start=1):
            S, V = run["scores"], run["V"]
            n = len(S)
            seen = np.tril(np.ones((n, n), bool)) if causal else np.ones((n, n), bool)
            assert np.abs(S).max() <= K.MAX_SCORE and not np.array_equal(S, S.T), (case, i)
            assert any(len(set(S[r][seen[r]])) > 1 for r in range(n)), (case, i)  # a query tells two keys apart
            assert not causal or (S[~seen] != 0).any(), (case, i)  # "mask with 0" is not "no mask"
            assert (V != 0).any(axis=1).all() and np.ptp(V, axis=0).max() > 0, (case, i)
        for a, b in combinations(runs, 2):
            assert not np.allclose(a["A"], b["A"]), case  # the heads attend differently
        if level == 3:
            assert np.abs(ex.part("out").reference).max() > 0, case


@pytest.mark.parametrize("level", K.LEVELS)
def test_every_parts_mistakes_are_apart(level):
    """Each head's mistakes in its output, the mistakes made in every head and the heads swapped in concat and
    out: none within the part's separation of its answer or of another mistake's."""
    for seed in SEEDS:
        ex = generated.exercise(K.ID, seed, level)
        for name, alternatives in _mistakes_by_part(ex).items():
            part = ex.part(name)
            clashes = misconceptions.clashes(part.reference, alternatives, misconceptions.separation(part))
            assert not clashes, (level, seed, name, clashes)


@pytest.mark.parametrize("level", K.LEVELS)
def test_the_hand_work_is_each_heads_count_and_fits_the_level(level):
    for seed in SEEDS:
        ex, case = exercises.generate(K.ID, seed, level), (level, seed)
        heads = sum((budget.count(K.head_given(ex.given, i), ["O"], written=()) for i in range(1, K.head_count(ex) + 1)),
                    budget.parts_written(ex))
        if level == 3:
            heads = heads + budget.product_operations(ex.part("concat").reference, ex.given["W_O"])
        assert engine.operations(ex) == heads, case
        assert engine.within_budget(ex), (case, engine.minutes(ex))


@pytest.mark.parametrize("level", [2, 3])
def test_each_heads_scaling_changes_its_output(level):
    for seed in SEEDS:
        ex = generated.exercise(K.ID, seed, level)
        for i, run in enumerate(_heads_run(ex, "no_scaling"), start=1):
            assert "O" in run.tainted and not np.allclose(run["O"], ex.part(f"O{i}").reference), (level, seed, i)


@pytest.mark.parametrize("level", K.LEVELS)
def test_a_catalogued_mistake_in_one_head_is_named(level):
    named = 0
    for seed in range(10):
        ex = generated.exercise(K.ID, seed, level)
        right = {p.name: np.array(p.reference) for p in ex.parts}
        for i in range(1, K.head_count(ex) + 1):
            name, head = f"O{i}", K.head_given(ex.given, i)
            for mid in misconceptions.CATALOG:
                env = pipeline.run(head, mistakes={mid}, until={"O"})
                alt = env["O"]
                if "O" not in env.tainted or np.isnan(alt).any():
                    continue
                if not misconceptions.apart(alt, ex.part(name).reference, misconceptions.separation(ex.part(name))):
                    continue
                for shown in (alt, np.round(alt, 2)):
                    fb = exercises.grade(ex, {**right, name: shown})
                    assert fb.parts[name].misconception == mid, (level, seed, name, mid, fb.parts[name].misconception)
                named += 1
    assert named > 0, level


@pytest.mark.parametrize("level", K.LEVELS)
def test_heads_concatenated_out_of_order_are_named(level):
    assert "misconception.concat_order" in catalog("en")
    for seed in range(10):
        ex = generated.exercise(K.ID, seed, level)
        answer = selftest.correct_answer(ex)
        swapped = np.concatenate([ex.part("O2").reference, ex.part("O1").reference], axis=1)
        answer["concat"] = selftest.as_text(swapped)
        fb = exercises.grade(ex, answer)
        assert fb.parts["concat"].misconception == "concat_order", (level, seed)


@pytest.mark.parametrize("level", K.LEVELS)
def test_careful_students_are_graded_right(level):
    """The self-test's right, wrong and unreadable answers; and a student who writes every head's output to 2
    decimals and carries those on into concat and out."""
    for seed in SEEDS:
        ex, case = generated.exercise(K.ID, seed, level), (level, seed)
        rng = np.random.default_rng(seed)
        assert exercises.grade(ex, selftest.correct_answer(ex)).score == 1.0, case
        assert not exercises.grade(ex, selftest.incorrect_answer(ex, rng)).correct, case
        assert exercises.grade(ex, selftest.invalid_answer(ex, rng)).score is None, case
        heads = [np.round(run["O"], 2) for run in _heads_run(ex)]
        careful = {f"O{i}": o for i, o in enumerate(heads, start=1)} | {"concat": np.concatenate(heads, axis=1)}
        if level == 3:
            careful["out"] = np.round(careful["concat"] @ ex.given["W_O"], 2)
        fb = exercises.grade(ex, careful)
        assert fb.correct, (case, {name: p.correct for name, p in fb.parts.items()})


def test_the_prompt_and_the_part_labels_are_in_the_catalog():
    en = catalog("en")
    for key in ("title", "summary", "prompt", "prompt_causal"):
        assert f"kind.multi_head.{key}" in en
    for level in K.LEVELS:
        for seed in range(10):
            ex = generated.exercise(K.ID, seed, level)
            prompt = engine.prompt(ex)
            assert "{" not in prompt and ("mask(" in prompt) == bool(ex.given["causal"]), (level, seed)
            for part in ex.parts:
                assert f"part.{part.name}" in en and "{" not in t(f"part.{part.name}"), (level, seed, part.name)


def test_the_solution_walks_each_head_then_concatenates():
    for level in K.LEVELS:
        for seed in range(6):
            ex = generated.exercise(K.ID, seed, level)
            steps = exercises.solve(ex)
            names = [s.name for s in steps]
            assert len(set(names)) == len(names) and names[:2] == ["Q1", "K1"], (level, seed, names)
            assert names.index("O1") < names.index("Q2") < names.index("O2") < names.index("concat"), (level, seed)
            assert names[-1] == ("out" if level == 3 else "concat"), (level, seed)
            by_name = {s.name: s for s in steps}
            for part in ex.parts:
                np.testing.assert_allclose(by_name[part.name].value, part.reference, err_msg=f"{level} {seed} {part.name}")
                assert all(text and "None" not in text for text in by_name[part.name].latex_strings()), (level, seed)
            concat = by_name["concat"]
            assert r"O^{(2)}" in concat.cell(0, concat.shape[1] - 1).latex, (level, seed)


def test_the_aids_hold_every_exponent_of_every_head():
    for level in K.LEVELS:
        for seed in range(6):
            ex = generated.exercise(K.ID, seed, level)
            table = {round(e.x, 9) for e in exercises.aids(ex).exp_table}
            needed = {round(float(x), 9) for run in _heads_run(ex) for x in run["masked"].ravel() if np.isfinite(x)}
            assert needed <= table, (level, seed)  # on the level's fixed eˣ grid


@pytest.mark.parametrize("version", sorted(STORED))
@pytest.mark.parametrize("level", ["1", "2", "3"])
def test_an_exercise_stored_at_an_earlier_version_still_shows_and_grades(version, level):
    ex = exercises.Exercise.from_dict(STORED[version][level])
    assert ex.version == version < K.VERSION, (version, level)
    tr = _trace(ex.given, K.head_count(ex))
    for i, head in enumerate(tr.heads, start=1):
        np.testing.assert_allclose(ex.part(f"O{i}").reference, head.O, err_msg=f"version {version} level {level} O{i}")
    still_shows_and_grades(ex)


@pytest.mark.parametrize("level", K.LEVELS)
def test_variety_does_not_collapse(level):
    seen = {tuple((k, np.asarray(v).tobytes()) for k, v in sorted(exercises.generate(K.ID, seed, level).given.items()))
            for seed in range(200)}
    assert len(seen) >= 180, (level, len(seen))


def test_the_practice_page_shows_and_grades_it():
    from tests.apptest_helpers import click_check, current_exercise, fill_cells, open_page

    at = open_page("app_pages/practice.py", {"kind": K.ID, "level": "2", "seed": "3"})
    assert not at.exception and at.session_state["practice.kind"] == K.ID
    ex = current_exercise(at)
    fill_cells(at, ex, {p.name: [[selftest.format_cell(x) for x in row] for row in p.reference] for p in ex.parts})
    click_check(at)
    assert not at.exception
    assert at.success and not at.error, [e.value for e in at.error]
