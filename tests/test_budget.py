"""The time budget (DESIGN §6): an operation count per exercise of what a hand solution writes (every value on
the way included), its minutes at the stated rates, every variant of every kind within its level's budget, and
Practice's line (with the rates) drawn in both languages."""

from __future__ import annotations

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
                            "lookups": 10.0, "cells": 5.0}
    assert budget.BUDGET_MINUTES == {1: 5.0, 2: 12.0, 3: 25.0}
    assert Operations(multiply_adds=6, exponentials=3, cells=12).seconds == 60 + 60 + 60


def test_a_product_by_hand_skips_zeros_and_adds_where_a_factor_is_one():
    left = np.array([[2.0, 0.0], [1.0, 3.0]])
    right = np.array([[1.0, 2.0], [4.0, -1.0]])
    # terms: row 1: 2·1, 2·2 (0·… skipped); row 2: 1·1, 3·4, 1·2, 3·(−1): ±1 factors are additions
    assert budget.product_operations(left, right) == Operations(multiply_adds=2, additions=4)


def test_a_softmax_row_needs_no_table_for_zero_or_a_masked_score():
    assert budget.softmax_row_operations([0.0, 1.0, -np.inf]) == Operations(exponentials=1, additions=1,
                                                                             divisions=2, cells=1)  # its sum
    assert budget.softmax_row_operations([2.0, -np.inf, -np.inf]) == Operations()  # one visible key: weight 1


def test_the_count_walks_the_registry_from_what_is_given_to_what_is_asked():
    given = {"Q": np.array([[1.0, 0.0], [0.0, 2.0]]), "K": np.array([[1.0, 1.0], [0.0, 1.0]]), "d_k": 4,
             "causal": False}
    ops = budget.count(given, ["A"])
    # S = [[1, 0], [2, 2]]: three terms, each with a factor 1 (additions); Z = S/2: 3 nonzero divisions;
    # softmax of [[.5, 0], [1, 1]]: 3 exponentials, 2 additions, 4 divisions; S, Z and A written (4 cells
    # each) and the two rows' sums
    assert ops == Operations(multiply_adds=0, additions=5, exponentials=3, divisions=7, cells=14)
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


def _cell_by_cell(left, right) -> Operations:
    """left @ right counted term by term: a term with a 0 factor is skipped, one with a ±1 factor is an
    addition, any other a multiply-add."""
    total = Operations()
    for i in range(left.shape[0]):
        for j in range(right.shape[1]):
            for k in range(left.shape[1]):
                x, y = left[i, k], right[k, j]
                if not (np.isfinite(x) and np.isfinite(y)) or abs(x) < 1e-12 or abs(y) < 1e-12:
                    continue
                unit = abs(abs(x) - 1) < 1e-12 or abs(abs(y) - 1) < 1e-12
                total = total + (Operations(additions=1) if unit else Operations(multiply_adds=1))
    return total


def test_the_product_and_softmax_counts_are_the_cell_by_cell_counts():
    rng = np.random.default_rng(11)
    cells = [0.0, 1.0, -1.0, 2.0, 0.5, 1e-13, 1.0 + 1e-13, -np.inf]
    for case in range(300):
        r, k, c = (int(x) for x in rng.integers(1, 6, size=3))
        left, right = rng.choice(cells, size=(r, k)), rng.choice(cells, size=(k, c))
        assert budget.product_operations(left, right) == _cell_by_cell(left, right), (case, left, right)
        expected = Operations()
        for row in left:
            seen = row[np.isfinite(row)]
            if len(seen) > 1:
                expected = expected + Operations(exponentials=int((np.abs(seen) > 1e-12).sum()),
                                                 additions=len(seen) - 1, divisions=len(seen), cells=1)
        assert budget.softmax_operations(left) == expected, (case, left)
    with pytest.raises(ValueError):
        budget.product_operations(np.ones((2, 3)), np.ones((2, 3)))
