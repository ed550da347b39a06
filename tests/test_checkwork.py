"""exercises.check_work: a learner's own inputs and hand-computed steps, checked step by step."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import exercises
from exercises.core import pipeline
from exercises.core.checkwork import BACKWARD, FORWARD
from exercises.i18n import Msg, catalog

GOLDEN_INPUTS = {"X": "[[1,0],[0,1],[1,1]]", "W_Q": "1 0; 0 1", "W_K": "1 0; 0 1", "W_V": "1 0\n0 1"}
GOLDEN_A = [[1, 0, 0], [0.330, 0.670, 0], [0.248, 0.248, 0.503]]
GOLDEN_O = [[1, 0], [0.330, 0.670], [0.752, 0.752]]


def _given(inputs: dict, causal: bool) -> dict:
    values = {k: exercises.parse_answer(v) for k, v in inputs.items()}
    width = values["W_Q"].shape[1] if "W_Q" in values else values["Q"].shape[1]
    return {**values, "d_k": width, "causal": causal}


def _filled(message: Msg) -> None:
    """`message` comes from the catalog and every placeholder of its template is filled (the text a
    learner typed may itself hold braces: it is quoted, never a template)."""
    template = catalog("en").get(message.key)
    assert template is not None, message.key
    params = {k: v.render() if isinstance(v, Msg) else v for k, v in message.params.items()}
    template.format(**params)  # raises KeyError on a placeholder left unfilled
    for value in message.params.values():
        if isinstance(value, Msg):
            _filled(value)


def _rendered(report) -> list[str]:
    messages = list(report.summary()) + list(report.claim_errors.values())
    for message in messages:
        _filled(message)
    return [m.render() for m in messages]


def _chain_from(inputs: dict, causal: bool, **wrong) -> dict[str, np.ndarray]:
    """Every forward step computed right, except that the steps in `wrong` take the given values and
    everything after them is computed from those."""
    env = pipeline.run({**_given(inputs, causal), **{k: np.asarray(v, dtype=float) for k, v in wrong.items()}})
    return {name: np.asarray(env[name]) for name in ("Q", "K", "V", "scores", "scaled", "masked", "A", "O")}


def test_golden_example_is_accepted():
    report = exercises.check_work(GOLDEN_INPUTS, {"scores": "1 0 1; 0 1 1; 1 1 2", "A": str(GOLDEN_A),
                                                  "O": str(GOLDEN_O)}, causal=True)
    assert report.ok and report.all_right and report.first_error is None
    assert [s.verdict for s in report.steps.values()] == ["right"] * 3
    assert report.d_k == 2 and report.causal
    np.testing.assert_allclose(report.reference["A"], GOLDEN_A, atol=1e-3)
    np.testing.assert_allclose(report.reference["O"], GOLDEN_O, atol=1e-3)
    assert report.steps["scores"].decimals == 0 and report.steps["A"].decimals == 3  # as typed
    assert any("right" in text for text in _rendered(report))


def test_reference_holds_every_step_beside_the_learners_values():
    report = exercises.check_work(GOLDEN_INPUTS, {"A": str(GOLDEN_A)}, causal=True)
    assert list(report.reference) == ["Q", "K", "V", "scores", "scaled", "masked", "A", "O"]
    assert np.isneginf(report.reference["masked"][0, 1])
    step = report.steps["A"]
    np.testing.assert_allclose(step.value, GOLDEN_A)
    np.testing.assert_allclose(step.true, report.reference["A"])


def test_one_error_in_the_scores_is_the_first_error_and_later_steps_are_consistent():
    wrong_scores = [[1, 0, 1], [1, 1, 1], [1, 1, 2]]  # row 2, column 1 should be 0 (visible under the mask)
    chain = _chain_from(GOLDEN_INPUTS, True, scores=wrong_scores)
    claimed = {name: np.round(chain[name], 3) for name in ("Q", "K", "V", "scores", "scaled", "masked", "A", "O")}
    report = exercises.check_work(GOLDEN_INPUTS, claimed, causal=True)
    assert report.first_error == "scores"
    assert report.consistent_after == ["scaled", "masked", "A", "O"]
    assert report.wrong_after == []
    assert [report.steps[n].verdict for n in ("Q", "K", "V")] == ["right"] * 3
    status = report.steps["scores"].status
    assert status[1, 0] == "wrong" and (np.delete(status.ravel(), 3) == "right").all()
    assert report.steps["A"].status[1, 0] == "consistent" and report.steps["A"].status[0, 0] == "right"
    texts = _rendered(report)
    assert "scores" in texts[0] and any("consistent" in t or "right for your value" in t for t in texts)


def test_a_second_independent_error_is_reported_as_wrong_after():
    chain = _chain_from(GOLDEN_INPUTS, True, scores=[[1, 0, 1], [1, 1, 1], [1, 1, 2]])
    claimed = {"scores": chain["scores"], "A": np.round(chain["A"], 2), "O": np.round(chain["O"], 2) + 1}
    report = exercises.check_work(GOLDEN_INPUTS, claimed, causal=True)
    assert report.first_error == "scores" and report.consistent_after == ["A"] and report.wrong_after == ["O"]


def test_an_error_in_a_masked_cell_does_not_spread():
    claimed = {"scores": "1 5 1; 0 1 1; 1 1 2", "A": str(GOLDEN_A), "O": str(GOLDEN_O)}  # (1, 2) is masked
    report = exercises.check_work(GOLDEN_INPUTS, claimed, causal=True)
    assert report.first_error == "scores" and report.consistent_after == []
    assert report.steps["A"].verdict == "right" and report.steps["O"].verdict == "right"


def test_whole_number_steps_are_exact_and_decimals_follow_the_setting():
    report = exercises.check_work(GOLDEN_INPUTS, {"scores": "1 0 1; 0 1 1; 1 1 2.01"}, causal=True)
    assert report.first_error == "scores"
    rough = [[1, 0, 0], [0.3, 0.7, 0], [0.2, 0.2, 0.5]]  # typed to 1 place: judged to 1 place
    assert exercises.check_work(GOLDEN_INPUTS, {"A": str(rough)}, causal=True).first_error is None
    assert exercises.check_work(GOLDEN_INPUTS, {"A": str(rough)}, causal=True, decimals=2).first_error == "A"
    sharp = "1 0 0; 0.3302 0.6698 0; 0.2483 0.2483 0.5035"  # 4 places: a slip in the 4th place is seen
    assert exercises.check_work(GOLDEN_INPUTS, {"A": sharp}, causal=True).first_error is None
    assert exercises.check_work(GOLDEN_INPUTS, {"A": sharp.replace("0.3302", "0.3308")},
                                causal=True).first_error == "A"


def test_likely_mistakes_are_named():
    inputs = {"X": "1 0; 0 1; 1 1", "W_Q": "1 1; 0 1", "W_K": "1 0; 1 1", "W_V": "1 0; 0 1"}
    given_values = _given(inputs, True)
    for mistake, step in [("no_scaling", "scaled"), ("transposed_scores", "scores"),
                          ("mask_diagonal", "masked"), ("softmax_columns", "A"), ("weights_transposed", "O")]:
        env = pipeline.run(given_values, mistakes={mistake})
        report = exercises.check_work(inputs, {step: np.round(env[step], 2)}, causal=True)
        assert report.first_error == step, mistake
        assert report.likely_mistake == mistake, (mistake, report.likely_mistake)
        assert any(Msg(f"misconception.{mistake}").render() in text for text in _rendered(report))


def test_a_mistake_is_found_from_the_learners_own_earlier_values():
    """No scaling, on top of wrong scores: the mistake is still recognised from their scores."""
    inputs = dict(GOLDEN_INPUTS)
    wrong_scores = np.array([[1, 0, 1], [1, 1, 1], [1, 1, 2]], dtype=float)
    env = pipeline.run({**_given(inputs, True), "scores": wrong_scores}, mistakes={"no_scaling"})
    report = exercises.check_work(inputs, {"scores": wrong_scores, "A": np.round(env["A"], 2)}, causal=True)
    assert report.first_error == "scores" and report.wrong_after == ["A"]
    assert report.steps["A"].mistake == "no_scaling"


def test_non_conformable_inputs_name_both_shapes():
    report = exercises.check_work({**GOLDEN_INPUTS, "X": "1 0; 0 1", "W_Q": "1 0; 0 1; 1 1"}, {"A": "1"})
    assert not report.ok and report.steps == {}
    texts = _rendered(report)
    assert any("2×2" in t and "3×2" in t and "X" in t and "W_Q" in t for t in texts), texts

    report = exercises.check_work({"Q": "1 0; 0 1", "K": "1 0 1; 0 1 1", "V": "1; 2; 3"}, {})
    texts = _rendered(report)
    assert any("2×2" in t and "2×3" in t for t in texts)  # Q and K widths
    assert any("2×3" in t and "3×1" in t for t in texts)  # K and V rows

    report = exercises.check_work({**GOLDEN_INPUTS, "G_O": "1 2 3"}, {})
    assert not report.ok and any("1×3" in t and "3×2" in t for t in _rendered(report))


def test_missing_and_unreadable_inputs():
    assert "X" in _rendered(exercises.check_work({}, {}))[0]
    report = exercises.check_work({"X": "1 0", "W_Q": "1; 0"}, {})
    assert not report.ok and "W_K" in _rendered(report)[0]
    report = exercises.check_work({**GOLDEN_INPUTS, "W_K": "1 0; 0 abc"}, {})
    assert not report.ok and "abc" in _rendered(report)[0]


UNREADABLE = {  # text a learner might type, and what is wrong with it
    "a backslash (a LaTeX paste)": "1 0\n0 \\x",
    "rows of different lengths": "1 0\n0",
    "a decimal comma": "0,5 0,25\n1 1",
    "an operand missing": "1 0\n0 2/",
    "an unknown name": "1 0\n0 foo",
    "brackets that do not match": "[[1, 0], [0, 1]",
    "a lone bad number": "1/",
}


def test_every_message_on_unreadable_text_names_the_box():
    """Each input box and each step box, each kind of unreadable text: the message names the box (its
    catalog label) as well as the row and column, in English and Chinese."""
    steps = {"scores": "1 0 1; 0 1 1; 1 1 2"}
    for box in ("X", "W_Q", "W_K", "W_V", "scores", "A", "O"):
        for what, text in UNREADABLE.items():
            if box in GOLDEN_INPUTS:
                report = exercises.check_work({**GOLDEN_INPUTS, box: text}, {})
                problems = report.errors
            else:
                report = exercises.check_work(GOLDEN_INPUTS, {**steps, box: text}, causal=True)
                problems = [report.claim_errors[box]]
            assert len(problems) == 1, f"box {box}, {what}: {problems}"
            for lang in ("en", "zh"):
                text_shown = problems[0].render(lang)
                label = Msg(f"part.{box}").render(lang)
                assert label in text_shown, f"box {box}, {what} ({lang}): {text_shown!r} does not name {label!r}"


def test_claims_that_cannot_be_read_are_set_aside_and_the_rest_is_checked():
    claimed = {"scores": "1 0 1; 0 1 1; 1 1 2", "A": "1 0 0; 1/0 1 0; 1 1 1", "O": "1 2", "G_A": "1 1 1",
               "X": "1 0; 0 1; 1 1", "nonsense": "1", "scaled": ""}
    report = exercises.check_work(GOLDEN_INPUTS, claimed, causal=True)
    assert report.ok and list(report.steps) == ["scores"] and report.steps["scores"].verdict == "right"
    assert set(report.claim_errors) == {"A", "O", "G_A", "X", "nonsense"}
    assert report.claim_errors["O"].key == "grade.shape"
    assert report.claim_errors["G_A"].key == "checkwork.needs_g_o"
    assert report.claim_errors["X"].key == "checkwork.step_is_input"
    _rendered(report)


def test_from_q_k_v_and_the_backward_golden_example():
    report = exercises.check_work({"Q": "1 0", "K": "1 0; 0 1", "V": "2 4; 6 8", "G_O": "1 2"},
                                  {"G_A": "10 22", "G_V": "?"})
    assert report.ok and report.steps["G_A"].verdict == "right"
    np.testing.assert_allclose(report.reference["G_A"], [[10, 22]])
    assert "G_W_Q" not in report.reference  # needs X
    report = exercises.check_work({"Q": "1 0", "K": "1 0; 0 1", "V": "2 4; 6 8"}, {"G_W_Q": "1"})
    assert report.claim_errors["G_W_Q"].key == "checkwork.needs_g_o"


def test_backward_steps_carry_errors_forward_too():
    inputs = {**GOLDEN_INPUTS, "G_O": "1 0; 0 1; 1 -1"}
    given_values = _given(inputs, True)
    truth = pipeline.run(given_values)
    wrong_g_a = np.array(truth["G_A"]) + np.array([[0, 0, 0], [1, 0, 0], [0, 0, 0]])
    env = pipeline.run({**given_values, "G_A": wrong_g_a}, rounding=3)  # each value written to 3 places
    claimed = {name: env[name] for name in BACKWARD}
    report = exercises.check_work(inputs, claimed, causal=True)
    assert list(report.steps) == [s for s in pipeline.STEP_BY_NAME if s in BACKWARD]
    assert report.first_error == "G_A"
    assert "G_scaled" in report.consistent_after and "G_X" in report.consistent_after
    assert report.steps["G_V"].verdict == "right"  # G_V does not depend on G_A
    assert report.wrong_after == []


def test_every_step_right_from_pipeline_values_for_random_inputs():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n, d, d_k, d_v = (int(x) for x in rng.integers(1, 4, size=4))
        inputs = {"X": rng.integers(-2, 3, (n, d)), "W_Q": rng.integers(-2, 3, (d, d_k)),
                  "W_K": rng.integers(-2, 3, (d, d_k)), "W_V": rng.integers(-2, 3, (d, d_v)),
                  "G_O": rng.integers(-2, 3, (n, d_v))}
        causal = bool(rng.integers(2))
        truth = pipeline.run({**{k: np.asarray(v, float) for k, v in inputs.items()}, "d_k": d_k, "causal": causal})
        claimed = {s: truth[s] for s in FORWARD + BACKWARD}
        report = exercises.check_work(inputs, claimed, causal=causal)
        assert report.all_right, [(s.name, s.verdict) for s in report.steps.values()]
        assert len(report.steps) == len(FORWARD) + len(BACKWARD)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["X", "W_Q", "W_K", "W_V", "Q", "K", "V", "G_O", "E"]),
                       st.text(max_size=30)),
       st.dictionaries(st.sampled_from(list(FORWARD + BACKWARD) + ["zzz"]), st.text(max_size=30)),
       st.booleans())
def test_never_raises_on_any_text(inputs, claimed, causal):
    report = exercises.check_work(inputs, claimed, causal=causal)
    _rendered(report)


# ---------------------------------------------------------------- round what you write, then compute

ROUNDING_INPUTS = {"X": "1 0; 0 1; 1 1", "W_Q": "1 0; 0 1", "W_K": "1 0; 0 1", "W_V": "1 2; 3 -1"}


def test_a_learner_who_rounds_and_carries_on_is_right():
    """A to 2 decimals, O computed from that A: O₃₁ is 3.00 (the truth 3.007 is more than 0.0051 away),
    and it is right, not "consistent" (it was consistent before, and not all right)."""
    from exercises.core.numbers import round_half_up

    exact = pipeline.run(_given(ROUNDING_INPUTS, False))
    A = round_half_up(exact["A"], 2)
    O = round_half_up(A @ exact["V"], 2)
    assert abs(O[2, 0] - exact["O"][2, 0]) > 0.0051
    claimed = {"scores": exact["scores"], "A": A, "O": O}
    report = exercises.check_work(ROUNDING_INPUTS, claimed, causal=False)
    assert [s.verdict for s in report.steps.values()] == ["right"] * 3
    assert report.all_right and report.first_error is None


def test_a_step_rounded_from_unclaimed_rounded_steps_is_right():
    """Only O claimed, computed on paper with every step rounded to 2 decimals (none written down)."""
    rounded = pipeline.run(_given(ROUNDING_INPUTS, False), rounding=2)
    report = exercises.check_work(ROUNDING_INPUTS, {"O": rounded["O"]}, causal=False)
    assert report.all_right


def test_consistent_only_after_an_earlier_wrong_step():
    """A wrong cell in A: O from that A is consistent; the same O with A right would be right."""
    exact = pipeline.run(_given(ROUNDING_INPUTS, False))
    A = np.round(exact["A"], 3)
    A[0] = A[0][::-1] + [0.1, 0, -0.1]
    report = exercises.check_work(ROUNDING_INPUTS, {"A": A, "O": A @ exact["V"]}, causal=False)
    assert report.first_error == "A" and report.consistent_after == ["O"]
    assert (report.steps["O"].status[0] == "consistent").all() and (report.steps["O"].status[1:] == "right").all()
