"""backprop: the whole backward pass of causal attention from G_O, one part per step.

Its references against central finite differences of attention_core's forward pass, its catalogued
mistakes named, careful students, every level's sizes and hand-friendly numbers, errors carried
forward, the worked solution and its closing check, the time budget, and exercises stored by older
versions of the kind.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import exercises
from attention_core import scaled_dot_product, self_attention, softmax
from attention_core.ops import apply_mask, scale, weighted_sum
from exercises.cli import selftest
from exercises.core import misconceptions, pipeline
from exercises.core.grading import CONSISTENT, WRONG
from exercises.kinds import backprop
from tests.kinds.common import assert_within_minutes_and_no_runaway
from tests.stored_exercise import still_shows_and_grades

KIND = "backprop"
LEVELS = backprop.LEVELS
STORED = json.loads((Path(__file__).parent / "stored" / "backprop.json").read_text())
STEP = 1e-6


def _case(level: int, seed: int, *more) -> str:
    return " ".join([f"{KIND} level {level} seed {seed}", *map(str, more)])


def central_difference(loss, point: dict[str, np.ndarray], name: str) -> np.ndarray:
    """∂loss/∂point[name], cell by cell: (L(x + h) − L(x − h)) / 2h."""
    base = np.array(point[name], dtype=float)
    grad = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        sides = []
        for sign in (1.0, -1.0):
            moved = base.copy()
            moved[idx] += sign * STEP
            sides.append(loss({**point, name: moved}))
        grad[idx] = (sides[0] - sides[1]) / (2 * STEP)
    return grad


def finite_differences(ex) -> dict[str, np.ndarray]:
    """Every gradient of L = sum(O ⊙ G_O), each by perturbing its own variable in the forward pass."""
    p = {k: np.array(v, dtype=float) for k, v in ex.matrices().items()}
    d_k, G_O = int(ex.given["d_k"]), p["G_O"]

    def after_scores(S):  # (n, n) -> O
        return weighted_sum(softmax(apply_mask(scale(S, d_k), True)), p["V"])

    def forward(q):
        return float(np.sum(scaled_dot_product(q["Q"], q["K"], q["V"], causal=True).O * G_O))

    losses = {
        "G_A": (lambda q: float(np.sum(weighted_sum(q["A"], q["V"]) * G_O)), "A"),
        "G_V": (forward, "V"),
        "G_scaled": (lambda q: float(np.sum(weighted_sum(softmax(apply_mask(q["Z"], True)), q["V"]) * G_O)), "Z"),
        "G_scores": (lambda q: float(np.sum(after_scores(q["S"]) * G_O)), "S"),
        "G_Q": (forward, "Q"),
        "G_K": (forward, "K"),
    }
    tr = scaled_dot_product(p["Q"], p["K"], p["V"], causal=True)
    np.testing.assert_allclose(tr.A, p["A"], atol=1e-12)  # the given weights are the forward pass's
    point = {**p, "Z": tr.scaled, "S": tr.scores}
    out = {name: central_difference(loss, point, var) for name, (loss, var) in losses.items()}
    if "X" in p:
        def full(q):
            return float(np.sum(self_attention(q["X"], q["W_Q"], q["W_K"], q["W_V"], causal=True).O * G_O))
        for name, var in (("G_W_Q", "W_Q"), ("G_W_K", "W_K"), ("G_W_V", "W_V"), ("G_X", "X")):
            out[name] = central_difference(full, p, var)
        np.testing.assert_allclose(self_attention(p["X"], p["W_Q"], p["W_K"], p["W_V"], causal=True).Q, p["Q"])
    return out


# ---------------------------------------------------------------- references and mistakes


@pytest.mark.parametrize("level", LEVELS)
def test_references_agree_with_finite_differences(level):
    for seed in range(12):
        ex = exercises.generate(KIND, seed, level)
        numeric = finite_differences(ex)
        for part in ex.parts:
            np.testing.assert_allclose(part.reference, numeric[part.name], atol=1e-6, rtol=0,
                                       err_msg=_case(level, seed, part.name))


@pytest.mark.parametrize("level", LEVELS)
def test_every_guarded_mistake_is_named(level):
    """Each guarded mistake that reaches a part, answered throughout, is named on some part; over 10 seeds
    every guard that can apply at the level is named at least once."""
    named = set()
    for seed in range(10):
        ex = exercises.generate(KIND, seed, level)
        for mid, alt in misconceptions.alternatives(ex, backprop.GUARDS).items():
            fb = exercises.grade(ex, {p.name: alt.get(p.name, p.reference) for p in ex.parts})
            assert not fb.correct, _case(level, seed, mid)
            found = {p.misconception for p in fb.parts.values()}
            assert mid in found, _case(level, seed, mid, found)
            named.add(mid)
    reaching = {mid for mid in backprop.GUARDS if ("G_X" in ex.part_names or not mid.startswith("grad_x_"))
                and ("G_K" in ex.part_names or mid != "grad_k_no_transpose")}
    assert named == reaching, _case(level, "0-9", sorted(reaching - named))


@pytest.mark.parametrize("level", LEVELS)
def test_careful_students(level):
    """A right answer scores 1.0 and names nothing, a wrong one scores below 1, an unreadable one is a format error."""
    for seed in range(20):
        ex = exercises.generate(KIND, seed, level)
        right = exercises.grade(ex, selftest.correct_answer(ex))
        assert right.score == 1.0 and right.misconception is None, _case(level, seed)
        rng = np.random.default_rng(seed)
        assert exercises.grade(ex, selftest.incorrect_answer(ex, rng)).score < 1.0, _case(level, seed)
        invalid = exercises.grade(ex, selftest.invalid_answer(ex, rng))
        assert invalid.score is None and any(p.format_error for p in invalid.parts.values()), _case(level, seed)


# ---------------------------------------------------------------- sizes and hand-friendly numbers


@pytest.mark.parametrize("level", LEVELS)
def test_sizes_and_hand_friendly_numbers(level):
    n, d_k, d_v, d = backprop.SIZES[level]
    names = [p for p in backprop.PARTS if p not in backprop.SHORT.get(level, ())] + (backprop.PROJECTION_PARTS if d else [])
    for seed in range(30):
        ex = exercises.generate(KIND, seed, level)
        g = ex.given
        assert ex.part_names == names, _case(level, seed)
        assert g["Q"].shape == (n, d_k) and g["V"].shape == (n, d_v) and g["d_k"] == d_k, _case(level, seed)
        assert ("X" in g) == bool(d) and (not d or g["X"].shape == (n, d)), _case(level, seed)
        G_O = g["G_O"]
        assert (G_O == np.round(G_O)).all() and (G_O != 0).all() and np.abs(G_O).max() <= 3, _case(level, seed)
        # A is the softmax of the stated, masked scores, positive wherever the mask allows
        A = g["A"]
        recomputed = pipeline.run({k: g[k] for k in ("Q", "K", "V", "d_k", "causal")})["A"]
        np.testing.assert_allclose(A, recomputed, atol=1e-12, err_msg=_case(level, seed))
        visible = np.tril(np.ones((n, n), dtype=bool))
        assert (A[visible] > 0).all() and (A[~visible] == 0).all(), _case(level, seed)
        for row in A:  # weights 2^m over their row's sum: the scaled scores are m ln 2
            seen = row[row > 0]
            ratio = np.log2(seen / seen.min())
            np.testing.assert_allclose(ratio, np.round(ratio), atol=1e-9, err_msg=_case(level, seed))
            assert ratio.max() <= 2 * backprop.MAX_EXPONENT, _case(level, seed)
        uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
        assert not np.allclose(uniform.T @ G_O, ex.part("G_V").reference), _case(level, seed, "the plain mean")
        G = ex.part("G_scaled").reference
        assert (G[~visible] == 0).all() and (G[0] == 0).all(), _case(level, seed)
        if d:
            assert d_k <= d, _case(level, seed, "projected up")


@pytest.mark.parametrize("level", LEVELS)
def test_every_given_matrix_is_shown_as_small_whole_numbers(level):
    """Q (and W_Q) are multiples of √d_k ln 2: shown as that unit times whole numbers on the page, the sheet
    and in Typst, never as 6-digit decimals (0.980258, 1.96052) a learner multiplies by hand."""
    from exercises.solutions import given_latex
    from exercises.worksheets.model import problem
    from exercises.worksheets.text import latex_given
    from exercises.worksheets.typst import _typst_given

    long_decimal = re.compile(r"\d\.\d{3,}")
    for seed in range(10):
        ex = exercises.generate(KIND, seed, level)
        sheet = problem(ex, 1, "en").given
        shown = [line for _, line in given_latex(ex)] + [latex_given(g) for g in sheet] + [_typst_given(g) for g in sheet]
        assert not [line for line in shown if long_decimal.search(line)], _case(level, seed)
        unit = next(line for name, line in given_latex(ex) if name == ("W_Q" if "X" in ex.given else "Q"))
        assert r"\ln 2 \cdot" in unit, _case(level, seed, unit)
        for g in sheet:
            if g.unit is not None:  # whole numbers times the unit are the given matrix
                assert (g.value == np.round(g.value)).all() and np.abs(g.value).max() <= 3, _case(level, seed, g.name)
                np.testing.assert_allclose(g.value * g.unit.value, ex.given[g.name], atol=1e-12,
                                           err_msg=_case(level, seed, g.name))


@pytest.mark.parametrize("level", LEVELS)
def test_the_time_budget(level):
    assert_within_minutes_and_no_runaway(KIND, level)


@pytest.mark.parametrize("level", LEVELS)
def test_variety(level):
    """At least 90 % of 200 seeds give distinct given values."""
    seen = {json.dumps({k: np.asarray(v).tolist() for k, v in exercises.generate(KIND, seed, level).given.items()},
                       sort_keys=True) for seed in range(200)}
    assert len(seen) >= 180, _case(level, "0-199", len(seen))


# ---------------------------------------------------------------- errors carried forward


@pytest.mark.parametrize("level", LEVELS)
def test_an_early_slip_keeps_later_credit(level):
    for seed in range(10):
        ex = exercises.generate(KIND, seed, level)
        answers = {p.name: p.reference for p in ex.parts}
        assert exercises.grade(ex, answers).score == 1.0, _case(level, seed)

        # the learner slips in one live cell of G_A, then works every later step correctly from it
        G_A = np.array(ex.part("G_A").reference)
        G_A[-1, 0] += 1  # the last row sees every key: this cell reaches G_scaled
        own = pipeline.run({**ex.given, "G_A": G_A})
        slipped = {**answers, **{p.name: own[p.name] for p in ex.parts if p.name != "G_V"}}
        fb = exercises.grade(ex, slipped)
        assert not fb.correct and fb.parts["G_A"].score == 1 - 1 / G_A.size, _case(level, seed)
        later = [p.name for p in ex.parts if p.name not in ("G_A", "G_V")]
        for name in later:
            assert fb.parts[name].score == 1.0, _case(level, seed, name)
            assert not (fb.parts[name].status == WRONG).any(), _case(level, seed, name)
        assert any((fb.parts[name].status == CONSISTENT).any() for name in later), _case(level, seed)
        assert fb.parts["G_scaled"].consistent and fb.score > 0.9, _case(level, seed)

        # the same slip with later steps copied from the reference gets no "consistent" marks
        plain = exercises.grade(ex, {**answers, "G_A": G_A})
        assert not any(p.consistent for p in plain.parts.values()), _case(level, seed)


def test_a_wrong_g_v_carries_into_g_w_v_and_g_x():
    ex = exercises.generate(KIND, 4, 3)
    answers = {p.name: p.reference for p in ex.parts}
    G_V = np.array(ex.part("G_V").reference)
    G_V[0, 0] += 2
    own = pipeline.run({**ex.given, "G_V": G_V})
    fb = exercises.grade(ex, {**answers, "G_V": G_V, "G_W_V": own["G_W_V"], "G_X": own["G_X"]})
    assert fb.parts["G_V"].score < 1
    assert fb.parts["G_W_V"].consistent and fb.parts["G_W_V"].score == 1.0
    assert fb.parts["G_X"].consistent and fb.parts["G_X"].score == 1.0


# ---------------------------------------------------------------- the worked solution

DERIVES = {"chain_G_A": "G_A", "chain_G_V": "G_V", "jacobian": "G_scaled", "scale": "G_scores", "chain_G_Q": "G_Q",
           "chain_G_K": "G_K", "chain_G_W_Q": "G_W_Q", "chain_G_X": "G_X"}


@pytest.mark.parametrize("level", LEVELS)
def test_solution_derives_then_states_then_checks(level):
    """Each derivation comes right before its matrix form; the closing finite-difference check agrees
    with the analytic cell to 1e-5 or better at every seed."""
    expected = [n for n in list(DERIVES)[:6] if DERIVES[n] not in backprop.SHORT.get(level, ())] \
        + (list(DERIVES)[6:] if level == 3 else [])
    for seed in range(30):
        ex = exercises.generate(KIND, seed, level)
        steps = exercises.solve(ex)
        names = [s.name for s in steps]
        assert [n for n in names if n in DERIVES] == expected, _case(level, seed, names)
        assert names[-1] == "check", _case(level, seed)
        for k, step in enumerate(steps):
            if step.name in DERIVES:
                assert names[k + 1] == DERIVES[step.name], _case(level, seed, step.name)
        work = steps[-1].display(exact=False)
        assert r"L(" in work and "2h" in work, _case(level, seed)
        assert int(re.search(r"< 10\^\{-(\d+)\}", work).group(1)) >= 5, _case(level, seed)


def test_the_check_runs_the_forward_pass_it_shows():
    """The two loss values in the check are attention_core's forward pass around the chosen entry."""
    from exercises.kinds._shared import backward as _backward

    ex = exercises.generate(KIND, 2, 2)
    G_Q = ex.part("G_Q").reference
    i, c = _backward.largest(G_Q)
    p = {k: np.array(v, dtype=float) for k, v in ex.matrices().items()}
    sides = []
    for sign in (1, -1):
        Q = p["Q"].copy()
        Q[i, c] += sign * _backward.H
        sides.append(float(np.sum(scaled_dot_product(Q, p["K"], p["V"], causal=True).O * p["G_O"])))
    shown = exercises.solve(ex)[-1].display(exact=False)
    for value in sides:
        assert _backward.loss_text(value)[1] in shown
    assert abs((sides[0] - sides[1]) / (2 * _backward.H) - G_Q[i, c]) < 1e-5


# ---------------------------------------------------------------- stored exercises and the page


@pytest.mark.parametrize("key", sorted(STORED))
def test_an_exercise_stored_by_an_older_version_still_shows_and_grades(key):
    ex = exercises.Exercise.from_dict(STORED[key])
    assert ex.version < backprop.VERSION, key
    assert exercises.grade(ex, {p.name: p.reference for p in ex.parts}).score == 1.0, key
    wrong = selftest.incorrect_answer(ex, np.random.default_rng(0))
    assert not exercises.grade(ex, wrong).correct, key
    assert [s.name for s in still_shows_and_grades(ex)][-1] == "check", key


