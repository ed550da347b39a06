"""backprop_loss: the backward pass from L = ½‖O − T‖², the seed notes' worked example at level 1.

Its references against the backward pass of the numbers shown (numpy, written out) and central finite
differences of the loss, its catalogued mistakes and the loss's own named, careful students (no mistake
within reach of what a student who rounds as they write gets), every level's sizes and numbers, the time
budget, and exercises stored by older versions of the kind.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import exercises
from attention_core import backward, self_attention
from exercises.cli import selftest
from exercises.core import engine, misconceptions
from exercises.core.grading import declared_decimals
from exercises.kinds import backprop_loss
from tests.kinds.common import assert_within_minutes_and_no_runaway
from tests.stored_exercise import still_shows_and_grades

KIND = "backprop_loss"
LEVELS = backprop_loss.LEVELS
STORED = json.loads((Path(__file__).parent / "stored" / "backprop_loss.json").read_text())


def _case(level: int, seed: int, *more) -> str:
    return " ".join([f"{KIND} level {level} seed {seed}", *map(str, more)])


def _answers(ex) -> dict[str, np.ndarray]:
    return {p.name: np.array(p.reference) for p in ex.parts}


def _loss(X, W_Q, W_K, W_V, T) -> float:
    return 0.5 * float(np.sum((self_attention(X, W_Q, W_K, W_V, causal=True).O - T) ** 2))


# ---------------------------------------------------------------- references and mistakes


def test_level_1_is_the_notes_example():
    ex = exercises.generate(KIND, 0, 1)
    g = ex.given
    np.testing.assert_array_equal(g["X"], [[1, 0], [0, 1], [1, 1]])
    for w in ("W_Q", "W_K", "W_V"):
        np.testing.assert_array_equal(g[w], np.eye(2))
    assert g["causal"] is True and g["d_k"] == 2
    # DESIGN §10: A ≈ [[1,0,0],[0.330,0.670,0],[0.248,0.248,0.503]], O ≈ [[1,0],[0.330,0.670],[0.752,0.752]]
    np.testing.assert_allclose(g["A"], [[1, 0, 0], [0.33, 0.67, 0], [0.25, 0.25, 0.50]])
    np.testing.assert_allclose(g["O"], [[1, 0], [0.33, 0.67], [0.75, 0.75]])
    np.testing.assert_allclose(ex.part("G_O").reference, g["O"] - g["T"])
    assert [p.name for p in ex.parts] == ["G_O", "G_A"]


@pytest.mark.parametrize("level", LEVELS)
def test_references_are_the_backward_pass_of_the_numbers_shown(level):
    """Computed from the numbers shown (numpy, written out); from the unrounded forward pass the same
    backward pass agrees with central finite differences of L = ½‖O − T‖²."""
    for seed in range(50):
        ex = exercises.generate(KIND, seed, level)
        g, ref = ex.given, _answers(ex)
        A, O, T, X = g["A"], g["O"], g["T"], g["X"]
        G_O = O - T
        Q, K, V = X @ g["W_Q"], X @ g["W_K"], X @ g["W_V"]
        expected = {"G_O": G_O, "G_A": G_O @ V.T, "G_V": A.T @ G_O}
        G_A = G_O @ V.T
        expected["G_scaled"] = G_Z = A * (G_A - np.sum(A * G_A, axis=1, keepdims=True))
        expected["G_scores"] = G_S = G_Z / np.sqrt(g["d_k"])
        expected.update(G_Q=G_S @ K, G_K=G_S.T @ Q)
        expected.update(G_W_Q=X.T @ expected["G_Q"], G_W_K=X.T @ expected["G_K"], G_W_V=X.T @ expected["G_V"],
                        G_X=expected["G_Q"] @ g["W_Q"].T + expected["G_K"] @ g["W_K"].T + expected["G_V"] @ g["W_V"].T)
        for name in ref:
            np.testing.assert_allclose(ref[name], expected[name], atol=1e-12, err_msg=_case(level, seed, name))
    tr = self_attention(X, g["W_Q"], g["W_K"], g["W_V"], causal=True)  # the last seed's, unrounded
    grads = backward(tr, tr.O - T)
    h = 1e-6
    for name in ("X", "W_Q", "W_K", "W_V"):
        point = {"X": X, "W_Q": g["W_Q"], "W_K": g["W_K"], "W_V": g["W_V"]}
        for idx in np.ndindex(point[name].shape):
            up = {k: np.array(v, dtype=float) for k, v in point.items()}
            down = {k: np.array(v, dtype=float) for k, v in point.items()}
            up[name][idx] += h
            down[name][idx] -= h
            fd = (_loss(**up, T=T) - _loss(**down, T=T)) / (2 * h)
            assert fd == pytest.approx(getattr(grads, "G_" + name)[idx], abs=1e-6), _case(level, 49, name, idx)


@pytest.mark.parametrize("mid, factor", [("loss_grad_sign", -1.0), ("loss_grad_doubled", 2.0)])
def test_the_loss_mistakes_are_named_on_g_o(mid, factor):
    for level in LEVELS:
        for seed in range(10):
            ex = exercises.generate(KIND, seed, level)
            wrong = factor * ex.part("G_O").reference
            for shown in (wrong, np.round(wrong, 2)):
                fb = exercises.grade(ex, {**_answers(ex), "G_O": shown})
                assert fb.parts["G_O"].misconception == mid, _case(level, seed, mid)
                assert fb.parts["G_A"].correct, _case(level, seed)  # later parts are right from the given numbers


@pytest.mark.parametrize("level", LEVELS)
def test_every_guarded_mistake_is_named(level):
    named = set()
    for seed in range(10):
        ex = exercises.generate(KIND, seed, level)
        for mid, alt in misconceptions.alternatives(ex, backprop_loss.GUARDS).items():
            fb = exercises.grade(ex, {p.name: alt.get(p.name, p.reference) for p in ex.parts})
            found = {p.misconception for p in fb.parts.values()}
            assert not fb.correct and mid in found, _case(level, seed, mid, found)
            named.add(mid)
    assert named, _case(level, "0-9")


# ---------------------------------------------------------------- careful students


@pytest.mark.parametrize("level", LEVELS)
def test_careful_students(level):
    """Right, wrong and unreadable answers; and no guarded mistake lands within reach of what a student
    writes who rounds each value to the asked places and computes on from it (the grader takes that as
    right, so the mistake would go unnamed)."""
    for seed in range(30):
        ex = exercises.generate(KIND, seed, level)
        right = exercises.grade(ex, selftest.correct_answer(ex))
        assert right.score == 1.0 and right.misconception is None, _case(level, seed)
        rng = np.random.default_rng(seed)
        assert exercises.grade(ex, selftest.incorrect_answer(ex, rng)).score < 1.0, _case(level, seed)
        invalid = exercises.grade(ex, selftest.invalid_answer(ex, rng))
        assert invalid.score is None and any(p.format_error for p in invalid.parts.values()), _case(level, seed)
        careful = engine.default_chain(ex, {}, declared_decimals(ex))
        assert exercises.grade(ex, {p.name: careful[p.name] for p in ex.parts}).score == 1.0, _case(level, seed)
        for name, alternatives in misconceptions.by_part(ex, backprop_loss.GUARDS).items():
            gap = misconceptions.separation(ex.part(name))
            for mid, alt in alternatives.items():
                assert misconceptions.apart(alt, careful[name], gap), _case(level, seed, name, mid)


# ---------------------------------------------------------------- sizes and numbers


@pytest.mark.parametrize("level", LEVELS)
def test_sizes_and_numbers_shown(level):
    """Three tokens of width 2, d_k = 2, causal; A and O to 2 decimals with every rounded row of A a
    distribution (positive where the mask allows); T of 0 and 1 on no cell of O; level 3's weights of
    −1, 0, 1 (the identity below)."""
    for seed in range(30):
        ex = exercises.generate(KIND, seed, level)
        g = ex.given
        assert ex.part_names == backprop_loss.PARTS[level], _case(level, seed)
        assert g["X"].shape == (3, 2) and g["d_k"] == 2 and g["causal"] is True, _case(level, seed)
        A, O = g["A"], g["O"]
        for M in (A, O):
            np.testing.assert_allclose(M, np.round(M, 2), atol=1e-12, err_msg=_case(level, seed))
        np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-9, err_msg=_case(level, seed))
        visible = np.tril(np.ones((3, 3), dtype=bool))
        assert (A[visible] > 0).all() and (A[~visible] == 0).all(), _case(level, seed)
        assert set(np.unique(g["T"])) <= {0.0, 1.0} and (np.abs(O - g["T"]) > 1e-9).all(), _case(level, seed)
        assert len({tuple(x) for x in g["X"].tolist()}) == 3, _case(level, seed, "two equal tokens")
        for w in ("W_Q", "W_K", "W_V"):
            assert set(np.unique(g[w])) <= {-1.0, 0.0, 1.0}, _case(level, seed, w)
            assert level == 3 or np.array_equal(g[w], np.eye(2)), _case(level, seed, w)


@pytest.mark.parametrize("level", LEVELS)
def test_the_time_budget(level):
    assert_within_minutes_and_no_runaway(KIND, level)


@pytest.mark.parametrize("level, least", [(1, 12), (2, 180), (3, 180)])
def test_variety(level, least):
    """Distinct given values over 200 seeds (level 1: the notes' example with its admissible targets)."""
    seen = {json.dumps({k: np.asarray(v).tolist() for k, v in exercises.generate(KIND, seed, level).given.items()},
                       sort_keys=True) for seed in range(200)}
    assert len(seen) >= least, _case(level, "0-199", len(seen))


# ---------------------------------------------------------------- stored exercises


@pytest.mark.parametrize("key", sorted(STORED))
def test_an_exercise_stored_by_an_older_version_still_shows_and_grades(key):
    ex = exercises.Exercise.from_dict(STORED[key])
    assert ex.version < backprop_loss.VERSION, key
    assert exercises.grade(ex, {p.name: p.reference for p in ex.parts}).score == 1.0, key
    wrong = selftest.incorrect_answer(ex, np.random.default_rng(0))
    assert not exercises.grade(ex, wrong).correct, key
    assert "G_O" in [s.name for s in still_shows_and_grades(ex)], key
