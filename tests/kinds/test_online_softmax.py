"""online_softmax: the running maximum, sum and accumulator after each tile against their closed forms
(everything up to tile t measured against the maximum so far), and O against the plain softmax(s) V, over
many seeds; its mistakes named exact and rounded; careful students (e^x from the table, every value
rounded as written) right; each level's tiles and minutes."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core.online_softmax import output, running_max, running_sum
from attention_core.ops import softmax
from exercises.core import engine, pipeline, steps
from exercises.core.numbers import round_half_up
from exercises.kinds import online_softmax as K
from exercises.solutions.exact import _exact_given
from tests.kinds.common import (
    assert_moodle_round_trip,
    careful_and_selftest_answers_grade_as_such,
    levels_hold_without_runaway,
    references_agree,
    solution_steps,
)


def _closed_form(given) -> dict[str, np.ndarray]:
    """After tile t: m_t the maximum of the keys read so far, ℓ_t and o_t their sums against it; O the plain
    softmax of the whole row times V."""
    s, V, tile = np.asarray(given["S"], dtype=float)[0], np.asarray(given["V"], dtype=float), int(given["tile"])
    m, l, o = [], [], []
    for end in range(tile, len(s) + 1, tile):
        seen = s[:end]
        top = seen.max()
        e = np.where(np.isfinite(seen), np.exp(seen - top), 0.0)
        m.append([top]), l.append([e.sum()]), o.append(e @ V[:end])
    return {"m": np.array(m), "l": np.array(l), "O_acc": np.array(o), "O": softmax(s[None]) @ V}


def careful(ex, places):
    """A student who reads e^x from the table (3 places) and rounds ℓ, o and O as they write them."""
    s, V, tile = ex.given["S"][0], ex.given["V"], int(ex.given["tile"])
    m_prev, l, o = -np.inf, 0.0, np.zeros(V.shape[1])
    ms, ls, os_ = [], [], []
    for start in range(0, len(s), tile):
        keys = s[start:start + tile]
        if np.isfinite(keys).any():
            m = max(m_prev, keys.max())
            alpha = round(float(np.exp(m_prev - m)), 3) if np.isfinite(m_prev) else 0.0
            p = np.round(np.exp(keys - m), 3)
            l = round_half_up(alpha * l + p.sum(), places)
            o = round_half_up(alpha * o + p @ V[start:start + tile], places)
            m_prev = m
        ms.append([m_prev]), ls.append([l]), os_.append(o)
    return {"m": np.array(ms), "l": np.array(ls), "O_acc": np.array(os_),
            "O": round_half_up(np.array(os_[-1:]) / ls[-1][0], places)}


def test_references_are_the_closed_forms_and_the_plain_softmax():
    references_agree(K.ID, _closed_form)


def test_online_softmax_equals_the_plain_softmax_over_many_shapes():
    rng = np.random.default_rng(5)
    for case in range(200):
        tile = int(rng.integers(1, 4))
        n_k = tile * int(rng.integers(1, 5))
        s = rng.normal(scale=3, size=(2, n_k))
        if case % 3 == 0:  # causal: the keys after a query masked, whole tiles among them
            s[0, int(rng.integers(1, n_k + 1)):] = -np.inf
        V = rng.normal(size=(2, n_k, 3))
        S = s[:, None, :]  # (2, 1, n_k)
        m = running_max(S, tile)
        O = output(running_sum(S, m, tile), running_sum(S, m, tile, V))
        np.testing.assert_allclose(O[:, 0], np.einsum("bk,bkd->bd", softmax(s), V), atol=1e-12,
                                   err_msg=f"case {case}: tile {tile}, n_k {n_k}")
        assert (np.diff(m[..., 0], axis=-1) >= 0).all(), f"case {case}: the running maximum went down"
    with pytest.raises(ValueError, match="tiles"):
        running_max(np.zeros((1, 1, 5)), 2)


def test_the_records_exact_rules_are_the_references_and_o_has_the_online_record():
    for level in K.LEVELS:
        ex = exercises.generate(K.ID, 1, level)
        env = pipeline.reference_env(ex)
        xs = {name: _exact_given(value) for name, value in ex.given.items()}
        for name in K.PARTS:
            xs[name] = steps.record_for(name, env).exact(xs, env)
            np.testing.assert_allclose(np.array(xs[name], dtype=float), ex.part(name).reference, atol=1e-12,
                                       err_msg=f"level {level}: the exact rule of {name}")
        assert steps.record_for("O", env).inputs == ("O_acc", "l"), f"level {level}: O from A V"
    attention = exercises.generate("attention", 0, 1)
    assert steps.record_for("O", pipeline.reference_env(attention)) is steps.STEP_BY_NAME["O"], "attention's O"


def test_each_level_has_its_tiles_and_minutes():
    def check(ex):
        n_k, tile, d_v, _, _, positions = K.SIZES[ex.level]
        case = f"online_softmax level {ex.level} seed {ex.seed}"
        assert ex.given["S"].shape == (1, n_k) and ex.given["V"].shape == (n_k, d_v), case
        m = ex.part("m").reference[:, 0]
        assert (np.diff(m) > 0).any(), f"{case}: the maximum never moves"
        if positions is not None:
            skipped = np.isneginf(ex.given["S"][0]).reshape(-1, tile).all(axis=1)
            assert skipped.any() and ex.given["causal"], f"{case}: no tile skipped whole"

    levels_hold_without_runaway(K.ID, check, distinct_at_least=36)


@pytest.mark.parametrize("level", K.LEVELS)
def test_careful_students_are_right(level):
    careful_and_selftest_answers_grade_as_such(K.ID, level, careful, range(12))


def test_the_solution_shows_both_ways():
    ex = exercises.generate(K.ID, 4, 3)
    steps = solution_steps(ex, after=("check",))
    np.testing.assert_allclose(steps["check"].value, steps["O"].value, err_msg="the one-pass O is the tiled O")
    last = steps["l"].value.shape[0] - 1
    assert "skipped" in str(steps["l"].cell(last, 0).note), steps["l"].cell(last, 0)
    assert "rescaled" in str(steps["l"].cell(1, 0).note), steps["l"].cell(1, 0)
    assert "{" not in engine.prompt(ex, "zh") and "token " in engine.prompt(ex), engine.prompt(ex)


def test_moodle_cloze_round_trips_through_the_grader():
    assert_moodle_round_trip(K.ID)
