"""Check my work on a page: pick a topic (Practice's), type your own inputs and any steps, get the report.

Every box has a fixed key (the input or step name, shared by all topics) and is filled with an example
only when the learner asks (or on first opening, the reference notes' example), so nothing the learner
typed is ever replaced: an error is shown beside it, never instead of it; a language switch keeps it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import exercises
from exercises.core import checkwork
from exercises.core.checkwork import BACKWARD, Report, StepCheck, read_matrix
from exercises.core.numbers import decimals_for
from exercises.core.parser import MAX_MATRIX_CHARS, AnswerError, run_budget
from exercises.i18n import catalog, msg, plural
from services import exams

from .i18n import lang_key, render, tr

PREFIX = "checkwork"
TOPIC = f"{PREFIX}.topic"  # the canonical topic (a kind id)
NUMBERS = ("number", "decimal")  # the given kinds typed on one line (d_k, groups, a cap)
TOPIC_WIDGET = f"{PREFIX}.topic_widget"  # + the language (ui.i18n.lang_key)
FORM_WIDGET = f"{PREFIX}.form_widget"  # + the topic and the language
CAUSAL = f"{PREFIX}.causal"
CHECKED = f"{PREFIX}.checked"  # set once the learner pressed Check: the report then follows their edits
DEFAULT_TOPIC = "attention"

# the reference notes' example: X = [[1,0],[0,1],[1,1]], identity weights, causal, with A and O as printed there
EXAMPLE_INPUTS = {"X": "1 0\n0 1\n1 1", "W_Q": "1 0\n0 1", "W_K": "1 0\n0 1", "W_V": "1 0\n0 1",
                  "Q": "", "K": "", "V": "", "G_O": ""}
EXAMPLE_CLAIMS = {"scores": "1 0 1\n0 1 1\n1 1 2", "A": "1 0 0\n0.330 0.670 0\n0.248 0.248 0.503",
                  "O": "1 0\n0.330 0.670\n0.752 0.752"}
TINT = {"right": "rgba(33, 195, 84, 0.22)", "wrong": "rgba(255, 75, 75, 0.25)",
        "consistent": "rgba(255, 170, 0, 0.28)"}
MARK = {"right": "✓", "wrong": "✗", "consistent": "≈"}


def input_key(name: str) -> str:
    return CAUSAL if name == "causal" else f"{PREFIX}.in.{name}"


def claim_key(name: str, topic: str = DEFAULT_TOPIC) -> str:
    """A step's box: each topic keeps its own (the steps of one calculation), the inputs are shared."""
    return f"{PREFIX}.claim.{name}" if topic == DEFAULT_TOPIC else f"{PREFIX}.claim.{topic}.{name}"


def stated_key(name: str) -> str:
    return f"{PREFIX}.stated.{name}"


def form_key(topic: str) -> str:
    return f"{PREFIX}.form.{topic}"  # the canonical form (a level) of each topic


def ensure_defaults() -> None:
    """Pre-fill the example once; later runs keep what is there."""
    state = st.session_state
    state.setdefault(TOPIC, DEFAULT_TOPIC)
    state.setdefault(CAUSAL, True)
    for name, text in EXAMPLE_INPUTS.items():
        state.setdefault(input_key(name), text)
    for name, text in EXAMPLE_CLAIMS.items():
        state.setdefault(claim_key(name), text)


def reset_example() -> None:
    """Button callback: put the reference notes' example back (topic attention, from X)."""
    state = st.session_state
    state[TOPIC], state[CAUSAL] = DEFAULT_TOPIC, True
    state[form_key(DEFAULT_TOPIC)] = checkwork.topic(DEFAULT_TOPIC).forms[-1].level
    for name, text in EXAMPLE_INPUTS.items():
        state[input_key(name)] = text
    for name in checkwork.topic(DEFAULT_TOPIC).steps + BACKWARD:
        state[claim_key(name)] = EXAMPLE_CLAIMS.get(name, "")
    state.pop(CHECKED, None)


def given_text(value: Any) -> Any:
    """A given value as a learner types it: a matrix one row per line, a list on one line, a number."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    array = np.asarray(value, dtype=float)
    if array.ndim == 0:
        return cell_text(float(array), None).replace("−", "-")
    rows = np.atleast_2d(array)
    return "\n".join(" ".join(cell_text(x, None).replace("−", "-") for x in row) for row in rows)


def fill(topic: str, level: int, given: dict[str, Any], stated: dict[str, Any]) -> None:
    """Put a topic's given data into its boxes (the steps emptied): an example, or a Practice problem."""
    state = st.session_state
    spec = checkwork.topic(topic)
    state[TOPIC] = topic
    form = next((f for f in spec.forms if set(f.inputs) == set(given)), None) or next(
        (f for f in spec.forms if f.level == level), spec.forms[-1])
    state[form_key(topic)] = form.level
    for name, value in given.items():
        state[input_key(name)] = given_text(value)
    for name in spec.stated:
        state[stated_key(name)] = given_text(stated[name]) if name in stated else ""
    for name in spec.steps:
        state[claim_key(name, topic)] = ""
    state.pop(CHECKED, None)


def offers(kind: str) -> bool:
    """Check my work takes this kind as a topic (reads that kind alone, not every kind)."""
    return checkwork.topic(kind) is not None


def start_from(ex: exercises.Exercise) -> None:
    """Practice's "check my work on this one": the problem's given data in the boxes, its steps empty."""
    fill(ex.kind, ex.level, dict(ex.given), dict(ex.params))


def fill_example() -> None:
    """Button callback: an example of the current topic and form (a generated problem's given data)."""
    topic = st.session_state[TOPIC]
    ex = exercises.generate(topic, seed=0, level=current_form(topic).level)
    fill(topic, ex.level, dict(ex.given), dict(ex.params))


AREA_HEIGHT = 120  # px: three rows of a matrix (or the three-line placeholder) without a scrollbar


def input_label(name: str) -> str:
    """What a box is, in words where the catalog has them (d_k, positions, a model's layers …)."""
    key = f"{PREFIX}.input.{name}"
    return tr(key) if key in catalog("en") else render(checkwork.label(name))


def _matrix_area(label: str, key: str, height: int = AREA_HEIGHT) -> None:
    st.text_area(label, key=key, height=height, placeholder=tr("checkwork.page.placeholder"),
                 max_chars=MAX_MATRIX_CHARS)


def _on_choice(canonical: str, widget: str) -> None:
    st.session_state[canonical] = st.session_state[widget]


def topic_ui() -> str:
    """The topic (Practice's names, translated: one widget per language following the canonical TOPIC)."""
    topics = list(checkwork.topic_ids())
    widget = lang_key(TOPIC_WIDGET)
    st.session_state[widget] = st.session_state[TOPIC]
    st.selectbox(tr("checkwork.page.topic"), topics, key=widget, format_func=lambda k: tr(f"kind.{k}.title"),
                 on_change=_on_choice, args=(TOPIC, widget))
    return st.session_state[TOPIC]


def current_form(topic: str) -> checkwork.Form:
    return _form(topic, current_form_level(st.session_state, topic))


def current_form_level(state: Any, topic: str) -> int:
    """The level of the form the learner picked for `topic` (its last form at first)."""
    spec = checkwork.topic(topic)
    return state[form_key(topic)] if form_key(topic) in state else spec.forms[-1].level


def _form(topic: str, level: int) -> checkwork.Form:
    spec = checkwork.topic(topic)
    return next((f for f in spec.forms if f.level == level), spec.forms[-1])


def _form_label(spec: checkwork.Topic, level: int) -> str:
    form = next(f for f in spec.forms if f.level == level)
    return ", ".join(n for n in form.inputs if spec.kinds[n] in ("matrix", "row"))


def inputs_ui(topic: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The topic's inputs (its form's matrices, lists, numbers and flags, its conventions and the model it
    states); returns ({name: text or flag}, {stated name: text})."""
    spec = checkwork.topic(topic)
    form = current_form(topic)
    if len(spec.forms) > 1:
        widget = lang_key(f"{FORM_WIDGET}.{topic}")
        st.session_state[widget] = form.level
        st.radio(tr("checkwork.page.mode"), [f.level for f in spec.forms], key=widget, horizontal=True,
                 format_func=lambda level: _form_label(spec, level), on_change=_on_choice,
                 args=(form_key(topic), widget))
        form = current_form(topic)
    boxes = [n for n in form.inputs if spec.kinds[n] in ("matrix", "row")]
    for row in range(0, len(boxes), 4):
        for column, name in zip(st.columns(4), boxes[row:row + 4]):
            with column:
                _matrix_area(input_label(name), input_key(name))
    # one line each, three side by side: values a convention fills in when left empty (RoPE's positions and
    # angles), numbers (d_k, groups), the model a topic states (the KV cache's layers, heads, d_head)
    lines = [(name, input_key(name), None) for name in spec.defaulted if name not in boxes]
    lines += [(name, input_key(name), tr("checkwork.page.number_placeholder"))
              for name in form.inputs if spec.kinds[name] in NUMBERS]
    lines += [(name, stated_key(name), tr("checkwork.page.number_placeholder")) for name in spec.stated]
    for row in range(0, len(lines), 3):
        for column, (name, key, placeholder) in zip(st.columns(3), lines[row:row + 3]):
            column.text_input(input_label(name), key=key, placeholder=placeholder, max_chars=MAX_MATRIX_CHARS)
    flags = [n for n in form.inputs if spec.kinds[n] == "flag" and n not in spec.implied] + list(spec.conventions)
    for name in flags:
        help_text = tr("checkwork.page.causal_help") if name == "causal" else None
        st.toggle(input_label(name), key=input_key(name), help=help_text)
    shown = boxes + list(spec.defaulted) + flags + [n for n in form.inputs if spec.kinds[n] in NUMBERS]
    inputs = {name: st.session_state.get(input_key(name), "") for name in dict.fromkeys(shown)}
    return inputs, {name: st.session_state.get(stated_key(name), "") for name in spec.stated}


def claims_ui(topic: str) -> dict[str, str]:
    """Text areas for the topic's steps; for a topic the step records compute, G_O and the backward steps
    in an expander."""
    spec = checkwork.topic(topic)
    st.subheader(tr("checkwork.page.steps"))
    st.caption(tr("checkwork.page.steps_help"))
    steps = list(current_form(topic).steps)
    for row in range(0, len(steps), 4):
        for column, name in zip(st.columns(4), steps[row:row + 4]):
            with column:
                _matrix_area(render(checkwork.label(name)), claim_key(name, topic))
    backward = [s for s in BACKWARD if s not in steps] if "G_O" in spec.optional else []
    if backward:
        with st.expander(tr("checkwork.page.backward"), expanded=bool(st.session_state.get(input_key("G_O")))):
            st.caption(tr("checkwork.page.backward_help"))
            _matrix_area(render(checkwork.label("G_O")), input_key("G_O"))
            for row in range(0, len(backward), 4):
                for column, name in zip(st.columns(4), backward[row:row + 4]):
                    with column:
                        _matrix_area(render(checkwork.label(name)), claim_key(name, topic))
    embedding = ["G_E"] if {"token_ids", "E"} <= set(spec.optional) and "X" in current_form(topic).inputs else []
    if embedding:  # X looked up from token embeddings: the backward pass goes on to the table's gradient
        with st.expander(tr("checkwork.page.embedding"), expanded=bool(st.session_state.get(input_key("E")))):
            st.caption(tr("checkwork.page.embedding_help"))
            ids, table, grad = st.columns(3)
            with ids:
                st.text_input(input_label("token_ids"), key=input_key("token_ids"), max_chars=MAX_MATRIX_CHARS)
            with table:
                _matrix_area(render(checkwork.label("E")), input_key("E"))
            with grad:
                _matrix_area(render(checkwork.label("G_E")), claim_key("G_E", topic))
    return {name: st.session_state.get(claim_key(name, topic), "") for name in steps + backward + embedding}


EXTRA_INPUTS = ("G_O", "token_ids", "E")  # the record inputs the expanders above offer, where a topic reads them


def run(topic: str, inputs: dict[str, Any], claimed: dict[str, str], stated: dict[str, str]) -> Report:
    """The report (matrices beyond the library's MAX_SIZE, or more text than one run's budget, are
    refused with a message before anything is computed or drawn)."""
    optional = checkwork.topic(topic).optional
    inputs = {**inputs, **{name: st.session_state.get(input_key(name), "") for name in EXTRA_INPUTS
                           if name in optional}}
    too_long = run_budget([{k: v for k, v in inputs.items() if isinstance(v, str)}, claimed, stated])
    if too_long is not None:
        return Report(errors=[too_long])
    if exams.locked(_readable(inputs)):  # an open exam's item is computed nowhere else
        return Report(errors=[msg("checkwork.exam_locked")])
    return checkwork.check(topic, inputs, claimed, stated)


def _readable(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs that read as matrices (the others get their message from the report)."""
    out = {}
    for name, text in inputs.items():
        if not isinstance(text, str):
            continue
        try:
            out[name] = read_matrix(name, text)
        except (AnswerError, ValueError):
            continue
    return out


def fits_ui(topic: str, inputs: dict[str, Any], claimed: dict[str, str], stated: dict[str, str],
            report: Report) -> None:
    """For a topic with conventions (RoPE): which ones the learner's numbers fit."""
    spec = checkwork.topic(topic)
    if not (spec.conventions or spec.defaulted) or not report.ok or not report.steps:
        return
    found = checkwork.fits(topic, inputs, claimed, stated)
    if not found:
        st.info(tr("checkwork.fits_none"), icon=":material/rule:")
    for labels in found:
        st.info(render(msg("checkwork.fits", labels=", ".join(render(m) for m in labels))), icon=":material/rule:")


# ---------------------------------------------------------------- the report


def cell_text(x: float, places: int | None) -> str:
    """A cell to `places` decimals; None: as typed (up to 6 decimals, trailing zeros dropped)."""
    if np.isneginf(x):
        return "−∞"
    if np.isposinf(x):
        return "∞"
    if np.isnan(x):
        return "?"
    text = f"{x:.6f}".rstrip("0").rstrip(".") if places is None else f"{x:.{places}f}"
    return ("0" if text in ("-0", "-0.0") else text).replace("-", "−")


def matrix_frame(value: np.ndarray, places: int | None, status: np.ndarray | None = None):
    """A matrix as a small table (rows and columns numbered from 1), cells tinted by status."""
    frame = pd.DataFrame([[cell_text(x, places) for x in row] for row in np.atleast_2d(value)])
    frame.index = [str(i + 1) for i in range(frame.shape[0])]
    frame.columns = [str(j + 1) for j in range(frame.shape[1])]
    if status is None:
        return frame
    colours = pd.DataFrame([[f"background-color: {TINT[s]}" for s in row] for row in status],
                           index=frame.index, columns=frame.columns)
    return frame.style.apply(lambda _: colours, axis=None)


def summary_ui(report: Report) -> None:
    """The report's messages, each in the box that fits it."""
    if not report.ok:
        for problem in report.errors:
            st.error(render(problem), icon=":material/error:")
        return
    if report.all_right and not report.claim_errors:
        st.success(render(plural("checkwork.all_right", len(report.steps))), icon=":material/check_circle:")
    for line in report.summary():
        key = line.key
        if key.startswith("checkwork.all_right."):
            continue
        if key == "checkwork.first_error":
            st.error(render(line), icon=":material/flag:")
        elif key == "checkwork.likely_mistake":
            st.warning(render(line), icon=":material/lightbulb:")
        elif key in ("checkwork.consistent_after", "checkwork.rounding"):
            st.info(render(line), icon=":material/trending_flat:")
        else:
            st.warning(render(line), icon=":material/info:")


def step_ui(name: str, reference: np.ndarray, check: StepCheck | None, problem: Any) -> None:
    """One step: the learner's value with marks beside the correct value (and the one their values give)."""
    verdict = check.verdict if check is not None else None
    badge = {"right": ":green-badge[✓ {}]", "wrong": ":red-badge[✗ {}]",
             "consistent": ":orange-badge[≈ {}]"}.get(verdict, ":gray-badge[{}]")
    # a field that holds text which cannot be read is not "not entered"
    missing = "unreadable" if problem is not None else "not_given"
    label = tr(f"checkwork.verdict.{verdict}") if verdict else tr(f"checkwork.verdict.{missing}")
    st.markdown(f"**{tr('part.' + name)}** " + badge.format(label))
    if problem is not None:
        st.warning(render(problem), icon=":material/edit_note:")
    # one more place than is checked (the places the learner wrote)
    places = 0 if decimals_for(reference) == 0 else (check.decimals + 1 if check is not None and check.decimals else 3)
    if check is None:
        st.caption(tr("checkwork.page.correct"))
        st.dataframe(matrix_frame(reference, places), key=f"{PREFIX}.ref.{name}")
        return
    yours, correct, own = st.columns(3)
    with yours:
        st.caption(tr("checkwork.page.yours"))
        st.dataframe(matrix_frame(check.value, None, check.status), key=f"{PREFIX}.yours.{name}")
    with correct:
        st.caption(tr("checkwork.page.correct"))
        st.dataframe(matrix_frame(reference, places), key=f"{PREFIX}.true.{name}")
    if check.own_differs and verdict != "right":  # what the learner's own earlier values give, when that is news
        with own:
            st.caption(tr("checkwork.page.own"))
            st.dataframe(matrix_frame(check.own, 0 if decimals_for(check.own) == 0 else 3), key=f"{PREFIX}.own.{name}")
    if check.mistake:
        st.caption(f"**{tr('misconception.title')}:** " + tr(f"misconception.{check.mistake}"))


def report_ui(report: Report) -> None:
    """The summary, then every step: the claimed ones with marks, the others with their correct value."""
    st.subheader(tr("checkwork.page.report"))
    summary_ui(report)
    if not report.ok:
        return
    st.caption(tr("checkwork.page.legend"))
    claimed = [name for name in report.reference if name in report.steps or name in report.claim_errors]
    for name in claimed:
        step_ui(name, report.reference[name], report.steps.get(name), report.claim_errors.get(name))
    others = [name for name in report.reference if name not in claimed]
    if others:
        with st.expander(tr("checkwork.page.other_steps")):
            for name in others:
                step_ui(name, report.reference[name], None, None)
    for name, problem in report.claim_errors.items():
        if name not in report.reference:
            st.warning(render(problem), icon=":material/edit_note:")
