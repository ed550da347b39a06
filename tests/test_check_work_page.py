"""AppTest: the Check my work page (app_pages/check_work.py) through the app's navigation."""

from __future__ import annotations

import numpy as np

from exercises import parse_answer
from exercises.core import pipeline
from exercises.i18n import escape, t
from tests.apptest_helpers import open_page
from ui import check_work as cw

PAGE = "app_pages/check_work.py"


def _check(at) -> None:
    at.button(key="checkwork.check_button").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]


def _text(at) -> str:
    return "\n".join(str(e.value) for kind in (at.success, at.error, at.info, at.warning) for e in kind)


def test_opens_prefilled_with_the_reference_example():
    at = open_page(PAGE)
    assert not at.exception
    assert at.text_area(key=cw.input_key("X")).value == "1 0\n0 1\n1 1"
    assert at.text_area(key=cw.input_key("W_V")).value == "1 0\n0 1"
    assert at.toggle(key=cw.CAUSAL).value is True
    assert at.text_area(key=cw.claim_key("A")).value == cw.EXAMPLE_CLAIMS["A"]
    assert at.text_area(key=cw.claim_key("masked")).value == ""
    assert not at.success and not at.error  # no report before Check


def test_golden_example_is_accepted():
    at = open_page(PAGE)
    _check(at)
    assert [s.value for s in at.success] == [t("checkwork.all_right.other", count=3)]
    assert not at.error
    assert len(at.dataframe) >= 3 * 2  # yours beside the correct value for scores, A, O


def test_one_wrong_score_is_the_first_error_and_later_steps_are_consistent():
    at = open_page(PAGE)
    wrong_scores = "1 0 1\n1 1 1\n1 1 2"  # row 2, column 1 should be 0
    given = {"X": parse_answer("1 0; 0 1; 1 1"), "W_Q": np.eye(2), "W_K": np.eye(2), "W_V": np.eye(2),
             "d_k": 2, "causal": True, "scores": parse_answer(wrong_scores)}
    env = pipeline.run(given)  # the learner's later steps, done right from the wrong scores
    at.text_area(key=cw.claim_key("scores")).input(wrong_scores)
    for name in ("scaled", "masked", "A", "O"):
        rows = ["  ".join("-inf" if np.isneginf(x) else f"{x:.3f}" for x in row) for row in env[name]]
        at.text_area(key=cw.claim_key(name)).input("\n".join(rows))
    at.run()
    _check(at)
    errors = [e.value for e in at.error]
    assert errors and errors[0] == t("checkwork.first_error", step=t("part.scores"))
    info = " ".join(e.value for e in at.info)
    for name in ("scaled", "masked", "A", "O"):
        assert t(f"part.{name}") in info
    assert not at.success
    assert at.text_area(key=cw.claim_key("scores")).value == wrong_scores  # nothing typed is lost


def test_non_conformable_shapes_give_a_message_and_keep_the_inputs():
    at = open_page(PAGE)
    _check(at)
    at.text_area(key=cw.input_key("W_Q")).input("1 0\n0 1\n1 1")
    at.run()
    assert not at.exception
    text = _text(at)
    assert "X is 3×2" in text and "W_Q is 3×2" in text
    assert not at.success and len(at.dataframe) == 0
    assert at.text_area(key=cw.input_key("W_Q")).value == "1 0\n0 1\n1 1"
    assert at.text_area(key=cw.input_key("X")).value == "1 0\n0 1\n1 1"
    assert at.text_area(key=cw.claim_key("A")).value == cw.EXAMPLE_CLAIMS["A"]


def test_garbage_anywhere_gives_messages_not_exceptions():
    at = open_page(PAGE)
    at.text_area(key=cw.input_key("X")).input("1 0\n0 abc\n1 1")
    at.text_area(key=cw.claim_key("O")).input("import os")
    at.run()
    _check(at)
    assert "abc" in _text(at)
    at.text_area(key=cw.input_key("X")).input("1 0\n0 1\n1 1")
    at.run()
    assert not at.exception
    assert any("O" in w.value for w in at.warning)  # the unreadable claim is named, the rest is checked
    assert at.text_area(key=cw.claim_key("O")).value == "import os"


def test_from_q_k_v_with_the_backward_pass():
    at = open_page(PAGE)
    at.radio(key=f"{cw.FORM_WIDGET}.attention.en").set_value(1)  # from Q, K and V
    at.run()
    for name, text in {"Q": "1 0", "K": "1 0\n0 1", "V": "2 4\n6 8"}.items():
        at.text_area(key=cw.input_key(name)).input(text)
    at.toggle(key=cw.CAUSAL).set_value(False)
    for name in ("scores", "A", "O"):
        at.text_area(key=cw.claim_key(name)).input("")
    at.text_area(key=cw.input_key("G_O")).input("1 2")
    at.text_area(key=cw.claim_key("G_A")).input("10 22")
    at.run()
    _check(at)
    assert [s.value for s in at.success] == [t("checkwork.all_right.one")]


def test_back_to_the_example_restores_it():
    at = open_page(PAGE)
    at.text_area(key=cw.input_key("X")).input("5")
    at.run()
    at.button(key="checkwork.example_button").click()
    at.run()
    assert at.text_area(key=cw.input_key("X")).value == "1 0\n0 1\n1 1"


def test_matrices_pasted_as_latex_are_read_and_the_golden_example_is_accepted():
    at = open_page(PAGE)
    at.text_area(key=cw.input_key("X")).input("\\begin{bmatrix}\n 1 & 0 \\\\\n 0 & 1 \\\\\n 1 & 1\n\\end{bmatrix}")
    at.text_area(key=cw.input_key("W_Q")).input(r"\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}")
    at.text_area(key=cw.claim_key("scores")).input(r"$$\begin{matrix} 1 & 0 & 1 \\ 0 & 1 & 1 \\ 1 & 1 & 2 \end{matrix}$$")
    at.text_area(key=cw.claim_key("A")).input(
        r"\begin{bmatrix} 1 & 0 & 0 \\ 0.33 & 0.67 & 0 \\ \frac{1}{4} & \frac{1}{4} & \frac{1}{2} \end{bmatrix}")
    at.run()
    _check(at)
    assert [s.value for s in at.success] == [t("checkwork.all_right.other", count=3)], _text(at)
    assert not at.error


def test_a_latex_command_outside_the_whitelist_is_named_with_its_place():
    at = open_page(PAGE)
    at.text_area(key=cw.input_key("X")).input(r"\begin{bmatrix} 1 & 0 \\ 0 & \input{x} \\ 1 & 1 \end{bmatrix}")
    at.run()
    _check(at)
    text = _text(at)
    command = escape.markdown(r"\input")  # the learner's text, shown literally
    assert f"'{command}'" in text and "row 2, column 2" in text.lower() and "character 1" in text, text
    assert not at.success


def test_a_character_that_is_not_allowed_names_its_box_row_and_column():
    """A LaTeX paste into W_V and into the scores: each message names its box, row and column."""
    at = open_page(PAGE)
    at.text_area(key=cw.input_key("W_V")).input("1 0\n0 \\x")
    at.run()
    _check(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("In W_V, row 2, column 2: the LaTeX command"), errors
    at.text_area(key=cw.input_key("W_V")).input("1 0\n0 1")
    at.text_area(key=cw.claim_key("scores")).input("@ 0")
    at.run()
    _check(at)
    shown = [w.value for w in at.warning if "not allowed" in w.value]
    assert shown and all(t("part.scores") in w and "row 1, column 1" in w for w in shown), shown


def test_a_topic_of_practice_is_checked_on_its_own_boxes():
    """GQA picked by its Practice name: an example of it filled in, one head typed right, one head with the
    wrong group's keys: the first wrong step and the group mistake named; the language switch keeps it all."""
    import exercises

    at = open_page(PAGE)
    at.selectbox(key=f"{cw.TOPIC_WIDGET}.en").set_value("gqa")
    at.run()
    at.button(key="checkwork.fill_button").click()
    at.run()
    ex = exercises.generate("gqa", seed=0, level=cw.current_form_level(at.session_state, "gqa"))
    assert at.text_area(key=cw.input_key("X")).value == cw.given_text(ex.given["X"])
    own = {p.name: p.reference for p in ex.parts}
    from exercises.kinds.gqa import mistakes_of

    wrong = next(name for name, found in mistakes_of(ex).items() if "gqa_wrong_group" in found)
    at.text_area(key=cw.claim_key("O1", "gqa")).input(cw.given_text(np.round(own["O1"], 2)))
    at.text_area(key=cw.claim_key(wrong, "gqa")).input(cw.given_text(np.round(mistakes_of(ex)[wrong]["gqa_wrong_group"], 2)))
    at.run()
    _check(at)
    errors = [e.value for e in at.error]
    assert errors and errors[0] == t("checkwork.first_error", step=t(f"part.{wrong}")), errors
    assert t("misconception.gqa_wrong_group") in " ".join(w.value for w in at.warning)
    at.sidebar.radio[0].set_value("zh")
    at.run()
    assert not at.exception
    assert at.session_state[cw.TOPIC] == "gqa"
    assert at.text_area(key=cw.claim_key(wrong, "gqa")).value.startswith(cw.given_text(np.round(
        mistakes_of(ex)[wrong]["gqa_wrong_group"], 2))[:3]), "nothing typed is lost on a language switch"
    assert [e.value for e in at.error][0] == t("checkwork.first_error", "zh", step=t(f"part.{wrong}", "zh"))


def test_practice_opens_check_my_work_on_its_problem():
    from tests.apptest_helpers import current_exercise

    at = open_page("app_pages/practice.py", query={"kind": "kv_cache", "level": "2", "seed": "3"})
    ex = current_exercise(at)
    at.button(key=f"checkwork-{ex.id}").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[cw.TOPIC] == "kv_cache"
    assert at.text_area(key=cw.input_key("K_cache")).value == cw.given_text(ex.given["K_cache"])
    assert at.text_input(key=cw.stated_key("layers")).value == str(ex.params["layers"])
    assert at.text_area(key=cw.claim_key("K", "kv_cache")).value == ""  # the steps are the learner's to type


def test_the_backward_pass_from_a_loss_down_to_the_embedding_table():
    """backprop_loss on the page: X, the weights and T typed, token ids and E in their expander; G_X written
    to 4 places and G_E added up from it are accepted."""
    from attention_core import backward, self_attention
    from attention_core.embedding import embed, embed_backward
    from exercises.core.numbers import round_half_up
    from tests.test_check_topics import BACKWARD_W, TARGET, TOKENS, E, text

    X = embed(TOKENS, E)  # tokens 0, 2, 0: rows 1 and 3 are one token's, G_E adds them
    trace = self_attention(X, BACKWARD_W["W_Q"], BACKWARD_W["W_K"], BACKWARD_W["W_V"], causal=True)
    G_X = round_half_up(backward(trace, trace.O - TARGET).G_X, 4)
    at = open_page(PAGE)
    at.selectbox(key=f"{cw.TOPIC_WIDGET}.en").set_value("backprop_loss")
    at.run()
    for name, value in {"X": X, **BACKWARD_W, "T": TARGET, "E": E}.items():
        at.text_area(key=cw.input_key(name)).input(text(value))
    at.text_input(key=cw.input_key("token_ids")).input("0 2 0")
    at.text_area(key=cw.claim_key("G_X", "backprop_loss")).input(text(G_X))
    at.text_area(key=cw.claim_key("G_E", "backprop_loss")).input(text(embed_backward(TOKENS, G_X, len(E))))
    at.run()
    _check(at)
    assert [s.value for s in at.success] == [t("checkwork.all_right.other", count=2)], _text(at)
