"""The time budget (DESIGN §6): an operation count per exercise of what a hand solution writes (every value on
the way included), its minutes at the stated rates (by how many digits each operand carries), the two problems a
review timed by hand within a quarter of their stopwatch times, every variant of every kind within its level's
budget, and Practice's line (with the rates) drawn in both languages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import exercises
from exercises.core import budget, engine, pipeline
from exercises.core.budget import Operations
from tests import generated

SEEDS = range(30)


def test_rates_and_budgets_are_the_stated_ones():
    assert budget.RATES == {"multiply_adds": 10.0, "divisions": 10.0, "additions": 3.0, "exponentials": 20.0,
                            "lookups": 10.0, "cells": 5.0, "product_digits": 5.0, "division_digits": 0.5,
                            "sum_digits": 1.0, "written_digits": 2.0}
    assert budget.BUDGET_MINUTES == {1: 5.0, 2: 12.0, 3: 25.0}
    assert Operations(multiply_adds=6, exponentials=3, cells=12).seconds == 60 + 60 + 60


def test_the_cost_of_an_operation_grows_with_its_operands_digits():
    # 2 · (−1): an addition; 2 · 1.5 in the head; 0.73 · 1.41: 2 · 3 digit products, five more than one
    assert budget.product_operations([[2.0]], [[-1.0]]) == Operations(additions=1)
    assert budget.product_operations([[2.0]], [[1.5]]) == Operations(multiply_adds=1)
    assert budget.product_operations([[0.73]], [[1.41]]) == Operations(multiply_adds=1, product_digits=5)
    assert budget.product_operations([[0.73]], [[1.41]]).seconds == 10 + 5 * 5
    assert budget.product_operations([[1.0]], [[1.41]]) == Operations(additions=1, sum_digits=2)  # 1.41 added
    # a cell written by its digits: 3 (one), 0.5 (a half), 12.5 (three), −∞ (a cell, no digits)
    assert budget.written([[3.0, 0.5, 12.5, -np.inf]]) == Operations(cells=4, written_digits=2)
    assert budget.digits([2980.958, 0.03, 20.0, 13.0]).tolist() == [6, 1, 1, 2]


REVIEWED = json.loads((Path(__file__).parent / "kinds" / "stored" / "stopwatch.json").read_text())


@pytest.mark.parametrize("problem", sorted(REVIEWED))
def test_a_problem_timed_by_hand_is_counted_within_a_quarter_of_its_stopwatch_time(problem):
    """Two problems worked by hand with a stopwatch (stored as they were then generated)."""
    ex = exercises.Exercise.from_dict(REVIEWED[problem]["exercise"])
    hand, counted = REVIEWED[problem]["hand_minutes"], engine.minutes(ex)
    assert abs(counted - hand) <= 0.25 * hand, f"{problem}: counted {counted:.1f} min, by hand {hand}"


def test_a_product_by_hand_skips_zeros_and_adds_where_a_factor_is_one():
    left = np.array([[2.0, 0.0], [1.0, 3.0]])
    right = np.array([[1.0, 2.0], [4.0, -1.0]])
    # terms: row 1: 2·1, 2·2 (0·… skipped); row 2: 1·1, 3·4, 1·2, 3·(−1): ±1 factors are additions
    assert budget.product_operations(left, right) == Operations(multiply_adds=2, additions=4)


def test_a_softmax_row_needs_no_table_for_zero_or_a_masked_score():
    # e⁰ + e¹ = 1 + 2.72 = 3.72 (2 columns more, its sum written: 2 digits more), 0.27 and 0.73 each from a
    # division of 3 · 2 digits (5 more each)
    assert budget.softmax_row_operations([0.0, 1.0, -np.inf]) == Operations(
        exponentials=1, additions=1, divisions=2, cells=1, sum_digits=2, written_digits=2, division_digits=10)
    assert budget.softmax_row_operations([2.0, -np.inf, -np.inf]) == Operations()  # one visible key: weight 1


def test_the_count_walks_the_registry_from_what_is_given_to_what_is_asked():
    given = {"Q": np.array([[1.0, 0.0], [0.0, 2.0]]), "K": np.array([[1.0, 1.0], [0.0, 1.0]]), "d_k": 4,
             "causal": False}
    ops = budget.count(given, ["A"])
    # S = [[1, 0], [2, 2]]: three terms, each with a factor 1 (additions); Z = S/2: 3 nonzero divisions;
    # softmax of [[.5, 0], [1, 1]]: 3 exponentials, 2 additions, 4 divisions; S, Z and A written (4 cells
    # each) and the two rows' sums. Digits: the sums 1.65 + 1 = 2.65 and 2.72 + 2.72 = 5.44 (2 + 2 + 2 columns
    # more), their weights 0.62, 0.38, 0.5, 0.5 (the divisions' digits: 3·2 − 1 twice, 3·1 − 1 twice), A's
    # 0.62 and 0.38 written (1 more digit each) and the sums (2 more each)
    assert ops == Operations(additions=5, exponentials=3, divisions=7, cells=14, sum_digits=6, division_digits=14,
                             written_digits=6)
    # d_k = 2: the same divisions, and √2 read off the aid once
    assert budget.count({**given, "d_k": 2}, ["A"]).lookups == 1
    # X = I: Q = X W_Q is W_Q as it stands, read off (no work, nothing written)
    eye = {"X": np.eye(2), "W_Q": np.array([[1.0, 2.0], [0.0, 1.0]])}
    assert budget.count(eye, ["Q"], written=()) == Operations()
    # W_V = I (the attention block's level 1): V = X W_V is X as it stands, read off too
    values = {"X": np.array([[1.0, 2.0], [0.0, -1.0]]), "W_V": np.eye(2)}
    assert budget.count(values, ["V"], written=()) == Operations(), "a product by a weight I is read off"


@pytest.mark.parametrize("kind_id,level", [(k, lv) for k, kind in exercises.KINDS.items() for lv in kind.LEVELS])
def test_every_variant_fits_its_levels_time_budget(kind_id, level):
    over = []
    for seed in SEEDS:
        ex = generated.exercise(kind_id, seed, level)
        minutes = engine.minutes(ex)
        assert minutes > 0
        if minutes > budget.BUDGET_MINUTES[level]:
            over.append(f"seed {seed}: {minutes:.1f} min {engine.operations(ex).as_dict()}")
    assert not over, f"{kind_id} level {level} over {budget.BUDGET_MINUTES[level]} min: " + "; ".join(over[:5])




def test_the_count_of_a_stack_of_heads_is_the_sum_of_each_heads():
    """budget.count on heads stacked (h, n, …), as a kind with several heads runs them: each head's count, summed."""
    rng = np.random.default_rng(8)
    for n, d_k, causal in ((2, 1, False), (3, 2, True), (3, 2, False)):
        X = rng.integers(-1, 3, (n, 2)).astype(float)  # (n, d)
        W = {w: rng.integers(-1, 2, (3, 2, d_k)).astype(float) for w in ("W_Q", "W_K", "W_V")}  # (h, d, d_k)
        heads = [{"X": X, **{w: v[i] for w, v in W.items()}, "d_k": d_k, "causal": causal} for i in range(3)]
        each = sum((budget.count(head, ["O"], written=()) for head in heads), budget.NONE)
        assert budget.count({"X": X, **W, "d_k": d_k, "causal": causal}, ["O"], written=()) == each, (n, d_k, causal)


def test_every_value_worked_out_on_the_way_is_written():
    """multi_head level 3 asks O1, O2, concat, out; a hand solution also writes each head's Q, K, V (unless a
    weight is I: read off), S, S/√d_k, A and each worked softmax row's sum, and looks √2 up once per head."""
    from exercises.kinds import multi_head

    for seed in range(5):
        ex = exercises.generate("multi_head", seed, 3)
        cells = sum(int(np.prod(p.shape)) for p in ex.parts)
        for i in range(1, multi_head.head_count(ex) + 1):
            head = multi_head.head_given(ex.given, i)
            env = pipeline.run(head)
            for name in ("Q", "K", "V"):
                cells += 0 if np.array_equal(head[f"W_{name}"], np.eye(2)) else env[name].size
            visible = np.isfinite(env["masked"]).sum(axis=1)
            cells += env["scores"].size + env["scaled"].size + env["A"].size + int((visible > 1).sum())
        ops = engine.operations(ex)
        assert ops.cells == cells, (seed, ops.cells, cells)
        assert ops.lookups == multi_head.head_count(ex), (seed, ops.lookups)


def test_a_kind_can_declare_its_own_count():
    ex = exercises.generate("multi_head", 0, 3)
    kind = exercises.KINDS["multi_head"]
    assert kind.operations is not None and engine.operations(ex) == kind.operations(ex)
    # two heads of the pipeline and concat · W_O: more than the cells it asks for
    assert engine.operations(ex).seconds > sum(int(np.prod(p.shape)) for p in ex.parts) * budget.RATES["cells"]


SCRIPT = """
import streamlit as st
import exercises
from ui import budget as budget_ui

st.session_state["lang"] = st.session_state.get("want_lang", "en")
ex = exercises.generate(st.session_state.get("kind", "attention"), 3, st.session_state.get("level", 2))
st.session_state["shown_minutes"] = budget_ui.show(ex)
"""


@pytest.mark.parametrize("lang,about,levels", [("en", "About", "What the levels mean"), ("zh", "手算约", "各级别的含义")])
def test_practice_line_shows_the_minutes_and_one_line_per_level(lang, about, levels):
    at = AppTest.from_string(SCRIPT, default_timeout=30)
    at.session_state["want_lang"] = lang
    at.run()
    assert not at.exception
    ex = exercises.generate("attention", 3, 2)
    minutes = engine.about_minutes(ex)
    assert at.session_state["shown_minutes"] == minutes
    caption = at.caption[0].value
    assert caption.startswith(about) and str(minutes) in caption and "12" in caption
    rates = at.caption[0].proto.help  # the stated rates, from budget.RATES
    assert "{" not in rates and all(f"{seconds:g}" in rates for seconds in budget.RATES.values()), rates
    assert at.expander[0].label == levels
    lines = at.expander[0].markdown[0].value.splitlines()
    assert len(lines) == len(budget.BUDGET_MINUTES) and all("{" not in line for line in lines)


def test_the_practice_page_says_about_how_many_minutes_the_problem_takes():
    from tests.apptest_helpers import open_page

    at = open_page("app_pages/practice.py", {"kind": "attention", "level": "2", "seed": "3"})
    ex = exercises.generate("attention", 3, 2)
    captions = " ".join(c.value for c in at.caption)
    assert f"About {engine.about_minutes(ex)} min by hand (level 2: at most 12 min)." in captions


def _digits_by_hand(x: float) -> int:
    """The digits of x as written at 2 decimals, read off its text: 1 for a whole number up to 10 or a half up to
    3 (done in the head), else its significant digits."""
    text = f"{abs(x):.2f}"
    if float(text) <= 10 and text.endswith(".00") or float(text) <= 3 and text.endswith(".50"):
        return 1
    return max(1, len(text.replace(".", "").lstrip("0").rstrip("0")))


def _cell_by_cell(left, right) -> Operations:
    """left @ right counted term by term: a term with a 0 factor is skipped, one with a ±1 factor is an
    addition (the other factor's digits beyond one: columns), any other a multiply-add (digits(x)·digits(y) − 1
    digit products more)."""
    total = Operations()
    for i in range(left.shape[0]):
        for j in range(right.shape[1]):
            for k in range(left.shape[1]):
                x, y = left[i, k], right[k, j]
                if not (np.isfinite(x) and np.isfinite(y)) or abs(x) < 1e-12 or abs(y) < 1e-12:
                    continue
                unit = abs(abs(x) - 1) < 1e-12 or abs(abs(y) - 1) < 1e-12
                weight = _digits_by_hand(x) * _digits_by_hand(y) - 1
                total = total + (Operations(additions=1, sum_digits=weight) if unit else
                                 Operations(multiply_adds=1, product_digits=weight))
    return total


def test_the_product_and_softmax_counts_are_the_cell_by_cell_counts():
    rng = np.random.default_rng(11)
    cells = [0.0, 1.0, -1.0, 2.0, 0.5, 0.73, 1.41, 12.5, 1e-13, 1.0 + 1e-13, -np.inf]
    for case in range(300):
        r, k, c = (int(x) for x in rng.integers(1, 6, size=3))
        left, right = rng.choice(cells, size=(r, k)), rng.choice(cells, size=(k, c))
        assert budget.product_operations(left, right) == _cell_by_cell(left, right), (case, left, right)
        expected = Operations()
        for row in left:
            seen = row[np.isfinite(row)]
            if len(seen) > 1:
                e = np.exp(seen)
                weights = [_digits_by_hand(x / e.sum()) for x in e]
                expected = expected + Operations(exponentials=int((np.abs(seen) > 1e-12).sum()),
                                                 additions=len(seen) - 1, divisions=len(seen), cells=1,
                                                 sum_digits=sum(_digits_by_hand(x) - 1 for x in e),
                                                 written_digits=_digits_by_hand(e.sum()) - 1,
                                                 division_digits=sum(_digits_by_hand(e.sum()) * w - 1 for w in weights))
        assert budget.softmax_operations(left) == expected, (case, left)
    with pytest.raises(ValueError):
        budget.product_operations(np.ones((2, 3)), np.ones((2, 3)))
