"""The worked solution on a page: the steps (exact or decimals), any cell explained, heatmaps.

    solution.show_button(ex, key)      # "Show solution"; returns True once the learner asked for it
    solution.show(ex, key)             # steps, exact/decimal switch, heatmaps, cell picker
    solution.was_shown(ex)             # for the attempt record: was the solution opened before?

Everything shown comes from exercises.solve(ex) (the grader's reference values); the rendered text is
cached per exercise and language with st.cache_data.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

import exercises
from attention_core import causal_mask
from exercises import Exercise
from exercises.rendering import latex as L

from . import attempts, mathview
from .i18n import lang, lang_key, tr

SHOWN = "practice.solution_shown"  # session key: ids of the exercises whose solution was opened
SCORE_STEPS = ("masked", "scaled", "scores")  # the softmax input, the most processed first
WEIGHT_STEPS = ("A",)


def fingerprint(ex: Exercise) -> str:
    """A cache key for an exercise: its triple and version, plus a hash of what it gives."""
    given = json.dumps(ex.to_dict()["given"], sort_keys=True)
    return f"{ex.kind}:{ex.seed}:{ex.level}:{ex.version}:{hashlib.sha1(given.encode()).hexdigest()[:12]}"


# ---------------------------------------------------------------- cached, plain data


@st.cache_data(max_entries=512, show_spinner=False)
def steps_view(key: str, language: str, _ex: Exercise) -> list[dict[str, Any]]:
    """Each step as plain data: title, note, both displays, shape, and its decimals for the heatmaps."""
    out = []
    for step in exercises.solve(_ex):
        out.append({"name": step.name, "title": step.title.render(language),
                    "note": step.note.render(language) if step.note else None,
                    "exact": step.display(exact=True), "decimal": step.display(exact=False),
                    "has_exact": any(c is not None for row in step.exact_cells for c in row),
                    "shape": step.shape, "value": step.value.tolist(), "labels": [list(r) for r in step.decimals]})
    return out


@st.cache_data(max_entries=8192, show_spinner=False)
def cell_view(key: str, language: str, step_index: int, i: int, j: int, _ex: Exercise) -> tuple[str, str | None]:
    """The LaTeX of one cell's derivation and its note, in `language`."""
    cell = exercises.solve(_ex)[step_index].cell(i, j)
    return cell.latex, cell.note.render(language) if cell.note else None


# ---------------------------------------------------------------- revealing


def was_shown(ex: Exercise) -> bool:
    return ex.id in st.session_state.get(SHOWN, [])


def reveal(ex: Exercise) -> None:
    """Remember that the solution was opened; the latest attempt on this exercise (if any) notes it."""
    shown = st.session_state.setdefault(SHOWN, [])  # a plain list: session state stays serializable
    if ex.id not in shown:
        shown.append(ex.id)
    earlier = attempts.for_exercise(ex)
    if earlier:
        earlier[-1]["solution_shown"] = True


def show_button(ex: Exercise, key: str) -> bool:
    """The "Show solution" button (once pressed, the solution stays open for this exercise)."""
    if not was_shown(ex):
        st.button(tr("solution.show"), key=f"{key}.show", on_click=reveal, args=(ex,),
                  icon=":material/school:", help=tr("solution.show_help"))
    return was_shown(ex)


# ---------------------------------------------------------------- drawing


def show(ex: Exercise, key: str) -> None:
    """The whole worked solution: switch, steps, heatmaps, cell picker."""
    view = steps_view(fingerprint(ex), lang(), ex)
    st.subheader(tr("solution.title"))
    if not attempts.for_exercise(ex):
        st.caption(tr("solution.revealed"))
    exact = st.toggle(tr("solution.exact_switch"), value=True, key=f"{key}.exact", help=tr("solution.exact_help"),
                      disabled=not any(s["has_exact"] for s in view))
    steps(view, exact)
    heatmaps(ex, view)
    cell_picker(ex, view, key)


def steps(view: list[dict[str, Any]], exact: bool) -> None:
    for number, step in enumerate(view, start=1):
        st.markdown(f"**{number}. {step['title']}**")
        mathview.show(step["exact"] if exact else step["decimal"])
        if step["note"]:
            st.caption(step["note"])


def cell_picker(ex: Exercise, view: list[dict[str, Any]], key: str) -> None:
    """Pick a step and a cell; show how that cell is computed."""
    st.markdown(f"**{tr('solution.cell_title')}**")
    left, middle, right = st.columns([3, 1, 1])
    index = left.selectbox(tr("solution.cell_step"), range(len(view)), key=lang_key(f"{key}.cell_step", carry=True),
                           format_func=lambda k: f"{k + 1}. {view[k]['title']}")
    rows, cols = view[index]["shape"]
    i = middle.selectbox(tr("solution.cell_row"), range(rows), key=f"{key}.cell_row.{index}",
                         format_func=lambda r: str(r + 1))
    j = right.selectbox(tr("solution.cell_col"), range(cols), key=f"{key}.cell_col.{index}",
                        format_func=lambda c: str(c + 1))
    latex, note = cell_view(fingerprint(ex), lang(), index, i, j, ex)
    mathview.show(latex)
    if note:
        st.caption(note)


QUERY_SOURCES = ("Q", "q", "X")  # the first that the exercise holds gives n_q, its row count
KEY_SOURCES = ("K", "V", "H", "X")  # and n_k (cross-attention: keys and values come from a memory H)


def _token_axes(ex: Exercise, view: list[dict[str, Any]]) -> tuple[int | None, int | None]:
    """(n_q, n_k): the rows of the queries and of the keys, from what the exercise gives, else from what
    the solution computes; None for an axis that neither holds."""
    given = {name: value.shape for name, value in ex.given.items() if isinstance(value, np.ndarray) and value.ndim == 2}
    computed = {s["name"]: tuple(s["shape"]) for s in view}

    def rows(sources: tuple[str, ...]) -> int | None:
        for shapes in (given, computed):
            for name in sources:
                if name in shapes:
                    return int(shapes[name][0])
        return None

    return rows(QUERY_SOURCES), rows(KEY_SOURCES)


def _matrix_for(ex: Exercise, view: list[dict[str, Any]], names: tuple[str, ...]) -> tuple[str, Any, Any] | None:
    """(name, values, labels) of the first of `names` that the solution computes or the exercise gives,
    when it is a query × key matrix: n_q × n_k when the exercise shows both axes, else square (a row of
    dot products or a table of shapes has the name of a step but is not one)."""
    n_q, n_k = _token_axes(ex, view)

    def query_by_key(shape: tuple[int, ...]) -> bool:
        if n_q is None or n_k is None:
            return shape[0] == shape[1]
        return tuple(shape) == (n_q, n_k)

    by_name = {s["name"]: s for s in view}
    for name in names:
        step = by_name.get(name)
        if step is not None and query_by_key(step["shape"]):
            return name, step["value"], step["labels"]
    for name in names:
        value = ex.given.get(name)
        if isinstance(value, np.ndarray) and value.ndim == 2 and query_by_key(value.shape):
            places = 0 if np.allclose(value[np.isfinite(value)] % 1, 0) else 2
            return name, value.tolist(), [[L.decimal(x, places) for x in row] for row in value]
    return None


def heatmap_records(values: Any, labels: Any, causal: bool, weights: bool) -> list[dict[str, Any]]:
    """One record per cell of an n_q × n_k matrix: query (its row), key (its column), value (None where
    masked), label, masked flag. Scores are masked where they are −∞; weights where the causal mask
    hides the key (the n_q queries are the last n_q of the n_k positions)."""
    n_q, n_k = len(values), len(values[0]) if len(values) else 0
    hidden = causal_mask(n_q, n_k) if weights and causal else np.zeros((n_q, n_k), dtype=bool)  # (n_q, n_k)
    records = []
    for i, row in enumerate(values):
        for j, x in enumerate(row):
            masked = bool(x == float("-inf")) or bool(hidden[i, j])
            label = labels[i][j]
            records.append({"query": i + 1, "key": j + 1, "value": None if masked else float(x),
                            "label": "−∞" if label == r"-\infty" else label.replace("-", "−"),
                            "masked": masked,
                            "status": tr("heatmap.masked_weight" if weights else "heatmap.masked") if masked
                            else tr("heatmap.visible")})
    return records


def heatmap_frame(values: Any, labels: Any, causal: bool, weights: bool) -> pd.DataFrame:
    """heatmap_records as the frame Altair draws."""
    return pd.DataFrame.from_records(heatmap_records(values, labels, causal, weights))


def heatmap(frame: pd.DataFrame, title: str) -> alt.LayerChart:
    """Cells coloured by value; masked cells grey with a dashed border and their label; no fixed text colour.
    Queries run down the rows and keys along the columns, 56 px a cell whatever n_q and n_k are."""
    n_q, n_k = int(frame["query"].max()), int(frame["key"].max())
    width, height = max(160, 56 * n_k), max(160, 56 * n_q)
    base = alt.Chart(frame, title=title).encode(
        x=alt.X("key:O", title=tr("heatmap.key"), axis=alt.Axis(labelAngle=0, orient="top")),
        y=alt.Y("query:O", title=tr("heatmap.query")),
        tooltip=[alt.Tooltip("query:O", title=tr("heatmap.query")),
                 alt.Tooltip("key:O", title=tr("heatmap.key")),
                 alt.Tooltip("label:N", title=tr("heatmap.value")),
                 alt.Tooltip("status:N", title=tr("heatmap.status"))],
    )
    # light fills only (the first half of the scheme), so the labels stay readable in light and dark themes
    visible = base.transform_filter("!datum.masked").mark_rect().encode(
        color=alt.Color("value:Q", title=tr("heatmap.value"), legend=alt.Legend(gradientLength=height),
                        scale=alt.Scale(scheme={"name": "blues", "extent": [0.05, 0.55]})))
    masked = base.transform_filter("datum.masked").mark_rect(  # aria=False: its labels carry the meaning
        color="lightgray", strokeDash=[4, 3], strokeWidth=1.5, stroke="gray", aria=False)
    text = base.mark_text(baseline="middle", fontSize=13).encode(text="label:N")
    # the description names the chart for a screen reader (Vega writes it as the SVG's aria-label)
    return alt.layer(visible, masked, text).properties(width=width, height=height,
                                                       description=tr("heatmap.description", title=title))


@st.cache_data(max_entries=64, show_spinner=False)
def _heatmap_template(language: str, title: str, weights: bool, n_q: int, n_k: int) -> dict[str, Any]:
    """A heatmap's Vega-Lite spec for one size, title and language, its data a placeholder: Altair builds
    and validates a chart in ~30–70 ms, the records of an exercise go into a copy in well under one."""
    zeros = [[0.0] * n_k for _ in range(n_q)]
    return heatmap(heatmap_frame(zeros, [["0"] * n_k for _ in range(n_q)], False, weights), tr(title)).to_dict()


@st.cache_data(max_entries=2048, show_spinner=False)
def heatmap_spec(key: str, language: str, title: str, weights: bool, causal: bool, values: Any,
                 labels: Any) -> dict[str, Any]:
    """One heatmap's Vega-Lite spec, made once per exercise and language: the template of its size with
    this exercise's cells as its one dataset."""
    template = _heatmap_template(language, title, weights, len(values), len(values[0]))
    (name,) = template["datasets"]
    return {**template, "datasets": {name: heatmap_records(values, labels, causal, weights)}}


def heatmaps(ex: Exercise, view: list[dict[str, Any]]) -> None:
    """Scores (the softmax input) and weights side by side, when the exercise has them."""
    causal = bool(ex.given.get("causal", False))
    found = [(_matrix_for(ex, view, SCORE_STEPS), "heatmap.scores", False),
             (_matrix_for(ex, view, WEIGHT_STEPS), "heatmap.weights", True)]
    found = [(m, title, weights) for m, title, weights in found if m is not None]
    if not found:
        return
    st.markdown(f"**{tr('solution.heatmaps')}**")
    columns = st.columns(len(found))
    for column, ((_name, values, labels), title, weights) in zip(columns, found):
        with column:
            spec = heatmap_spec(fingerprint(ex), lang(), title, weights, causal, values, labels)
            st.vega_lite_chart(spec, theme="streamlit", height=int(spec["height"]) + 90)

