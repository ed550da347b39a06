"""Check my work on a page: the learner's inputs and steps as pasted matrices, then the report.

Every text area has a fixed key and is filled with the reference notes' example only when that key
is new, so nothing the learner typed is ever replaced: an error is shown beside it, never instead of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import exercises
from exercises.core.checkwork import BACKWARD, FORWARD, FROM_QKV, FROM_X, NEEDS_X, Report, StepCheck, read_matrix
from exercises.core.numbers import decimals_for
from exercises.core.parser import MAX_MATRIX_CHARS, AnswerError, run_budget
from exercises.i18n import msg, plural
from services import exams

from .i18n import lang_key, render, tr

PREFIX = "checkwork"
MODE = f"{PREFIX}.mode"  # "X": from X and the weights; "QKV": from Q, K, V
CAUSAL = f"{PREFIX}.causal"
CHECKED = f"{PREFIX}.checked"  # set once the learner pressed Check: the report then follows their edits
MODES = ("X", "QKV")
MODE_WIDGET = f"{PREFIX}.mode_widget"  # + the language (ui.i18n.lang_key)

# the reference notes' example: X = [[1,0],[0,1],[1,1]], identity weights, causal, with A and O as printed there
EXAMPLE_INPUTS = {"X": "1 0\n0 1\n1 1", "W_Q": "1 0\n0 1", "W_K": "1 0\n0 1", "W_V": "1 0\n0 1",
                  "Q": "", "K": "", "V": "", "G_O": ""}
EXAMPLE_CLAIMS = {"scores": "1 0 1\n0 1 1\n1 1 2", "A": "1 0 0\n0.330 0.670 0\n0.248 0.248 0.503",
                  "O": "1 0\n0.330 0.670\n0.752 0.752"}
TINT = {"right": "rgba(33, 195, 84, 0.22)", "wrong": "rgba(255, 75, 75, 0.25)",
        "consistent": "rgba(255, 170, 0, 0.28)"}
MARK = {"right": "✓", "wrong": "✗", "consistent": "≈"}


def input_key(name: str) -> str:
    return f"{PREFIX}.in.{name}"


def claim_key(name: str) -> str:
    return f"{PREFIX}.claim.{name}"


def ensure_defaults() -> None:
    """Pre-fill every widget once (the example); later runs keep what is there."""
    state = st.session_state
    state.setdefault(MODE, "X")
    state.setdefault(CAUSAL, True)
    for name, text in EXAMPLE_INPUTS.items():
        state.setdefault(input_key(name), text)
    for name in FORWARD + BACKWARD:
        state.setdefault(claim_key(name), EXAMPLE_CLAIMS.get(name, ""))


def reset_example() -> None:
    """Button callback: put the example back (the only thing that ever overwrites the text areas)."""
    state = st.session_state
    state[MODE], state[CAUSAL] = "X", True
    for name, text in EXAMPLE_INPUTS.items():
        state[input_key(name)] = text
    for name in FORWARD + BACKWARD:
        state[claim_key(name)] = EXAMPLE_CLAIMS.get(name, "")
    state.pop(CHECKED, None)


AREA_HEIGHT = 120  # px: three rows of a matrix (or the three-line placeholder) without a scrollbar


def _matrix_area(name: str, key: str, height: int = AREA_HEIGHT) -> None:
    st.text_area(tr(f"part.{name}"), key=key, height=height, placeholder=tr("checkwork.page.placeholder"),
                 max_chars=MAX_MATRIX_CHARS)


def _on_mode(widget: str) -> None:
    st.session_state[MODE] = st.session_state[widget]


def inputs_ui() -> tuple[dict[str, str], bool]:
    """The inputs and the causal switch; returns ({name: text}, causal)."""
    # the options are translated: one widget per language, following the canonical MODE
    widget = lang_key(MODE_WIDGET)
    st.session_state[widget] = st.session_state[MODE]
    mode = st.radio(tr("checkwork.page.mode"), MODES, key=widget, horizontal=True, on_change=_on_mode,
                    args=(widget,), format_func=lambda m: tr(f"checkwork.page.mode_{m}"))
    names = FROM_X if mode == "X" else FROM_QKV
    for column, name in zip(st.columns(len(names)), names):
        with column:
            _matrix_area(name, input_key(name))
    causal = st.toggle(tr("checkwork.page.causal"), key=CAUSAL, help=tr("checkwork.page.causal_help"))
    inputs = {name: st.session_state.get(input_key(name), "") for name in names}
    return inputs, bool(causal)


def claims_ui(mode: str) -> dict[str, str]:
    """Text areas for the forward steps, and in an expander G_O and the backward steps."""
    st.subheader(tr("checkwork.page.steps"))
    st.caption(tr("checkwork.page.steps_help"))
    forward = [s for s in FORWARD if mode == "X" or s not in FROM_QKV]
    for row in range(0, len(forward), 4):
        for column, name in zip(st.columns(4), forward[row:row + 4]):
            with column:
                _matrix_area(name, claim_key(name))
    backward = [s for s in BACKWARD if mode == "X" or s not in NEEDS_X]
    with st.expander(tr("checkwork.page.backward"), expanded=bool(st.session_state.get(input_key("G_O")))):
        st.caption(tr("checkwork.page.backward_help"))
        _matrix_area("G_O", input_key("G_O"))
        for row in range(0, len(backward), 4):
            for column, name in zip(st.columns(4), backward[row:row + 4]):
                with column:
                    _matrix_area(name, claim_key(name))
    return {name: st.session_state.get(claim_key(name), "") for name in forward + backward}


def run(inputs: dict[str, str], claimed: dict[str, str], causal: bool) -> Report:
    """The report (matrices beyond the library's MAX_SIZE, or more text than one run's budget, are
    refused with a message before anything is computed or drawn)."""
    g_o = st.session_state.get(input_key("G_O"), "")
    too_long = run_budget([inputs, claimed, g_o])
    if too_long is not None:
        return Report(errors=[too_long], causal=causal)
    if exams.locked(_readable(inputs)):  # an open exam's item is computed nowhere else
        return Report(errors=[msg("checkwork.exam_locked")], causal=causal)
    return exercises.check_work({**inputs, "G_O": g_o}, claimed, causal=causal)


def _readable(inputs: dict[str, str]) -> dict[str, Any]:
    """The inputs that read as matrices (the others get their message from the report)."""
    out = {}
    for name, text in inputs.items():
        try:
            out[name] = read_matrix(name, text)
        except (AnswerError, ValueError):
            continue
    return out


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
    places = 0 if decimals_for(reference) == 0 else 3  # one more place than is checked
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
