"""A bare Practice page: the same Streamlit elements as app_pages/practice.py, and no logic at all.

bench/bench_page.py runs it next to the real page to price what the app adds to Streamlit's own cost.
How many of each element to draw comes from the URL (the bench reads it off the real exercise):

    parts        the answer grids' shapes, e.g. 3x3,3x2,1x1 (each: a heading, a paste box when it has
                 more than one cell, column numbers, a row of cells per row with its number)
    choices      multiple-choice parts (a radio each)
    given        LaTeX blocks of the problem (three to a row)
    aids         LaTeX blocks of aids
    steps        solution steps         charts  heatmaps (0–2)        n  heatmap size (n × n)
    content      optional: a JSON file of the real page's LaTeX ({"given", "aids", "steps"}: a list of
                 strings each, one such object per problem, New problem moving to the next), drawn in place
                 of the fixed matrices, so the page also costs what typesetting the real formulas costs

The grid is drawn as ui/answer_grid draws it (a keyed container, one line of HTML for the column
numbers, a horizontal container per row), the hints as an expander with a button, the paper tools as
a download button and a code box: bench_page prints both pages' element counts side by side. What is drawn
is fixed but for the problem's number: New problem draws new numbers in the given, aids and steps (the browser
typesets them again, as it must for the real page's new problem) and moves the address to the new seed, as the
real page does; the other buttons only flip flags. Run alone: streamlit run bench/bare_practice.py
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st


def matrix(problem: int) -> str:
    """A 3 × 3 matrix of the problem's own numbers (a new problem: new numbers to typeset)."""
    return rf"\begin{{bmatrix}} {problem % 3} & 0 & -2 \\ 0.5 & 2 & 1 \\ -1 & {problem % 5} & 0 \end{{bmatrix}}"


def step(problem: int) -> str:
    m = matrix(problem)
    return r"\begin{aligned} S &= Q K^{\top} \\ &= " + m + r" \\ &\approx " + m + r"\end{aligned}"


@functools.lru_cache(maxsize=64)
def _formulas(path: str) -> list[dict[str, list[str]]]:
    """The `content` file, read once per process (the bench writes each one once)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def content(problem: int, what: str, index: int) -> str:
    """The real page's LaTeX for this block (the `content` file), else the fixed stand-in."""
    path = st.query_params.get("content")
    if path:
        problems = _formulas(path)
        blocks = problems[problem % len(problems)][what]
        if blocks:
            return blocks[index % len(blocks)]
    return step(problem) if what == "steps" else matrix(problem)


def number(name: str, default: int) -> int:
    try:
        return int(st.query_params.get(name, default))
    except ValueError:
        return default


def flag(name: str) -> None:
    st.session_state[name] = True


def new_problem() -> None:
    st.session_state["bare.problem"] = st.session_state.get("bare.problem", 0) + 1
    st.query_params["seed"] = str(st.session_state["bare.problem"])  # the address names the new problem
    st.session_state["bare.checked"] = st.session_state["bare.solved"] = False


def heatmap(n: int) -> alt.LayerChart:
    frame = pd.DataFrame.from_records([{"query": i + 1, "key": j + 1, "value": float(i - j), "label": f"{i - j}",
                                        "masked": j > i, "status": "visible"} for i in range(n) for j in range(n)])
    base = alt.Chart(frame, title="weights").encode(
        x=alt.X("key:O", title="key", axis=alt.Axis(labelAngle=0, orient="top")), y=alt.Y("query:O", title="query"),
        tooltip=[alt.Tooltip("query:O"), alt.Tooltip("key:O"), alt.Tooltip("label:N"), alt.Tooltip("status:N")])
    visible = base.transform_filter("!datum.masked").mark_rect().encode(color=alt.Color("value:Q"))
    masked = base.transform_filter("datum.masked").mark_rect(color="gray", opacity=0.35, strokeDash=[4, 3],
                                                              strokeWidth=1.5, stroke="gray")
    text = base.mark_text(baseline="middle", fontSize=13).encode(text="label:N")
    return alt.layer(visible, masked, text).properties(width=max(160, 56 * n), height=max(160, 56 * n))


def shapes() -> list[tuple[int, int]]:
    found = []
    for text in str(st.query_params.get("parts", "3x3")).split(","):
        rows, _, cols = text.partition("x")
        if rows.isdigit() and cols.isdigit():
            found.append((min(int(rows), 12), min(int(cols), 12)))
    return found or [(3, 3)]


def grid(problem: int, index: int, rows: int, cols: int, checked: bool) -> None:
    """One part's cells as ui/answer_grid draws them."""
    st.markdown(f"**The attention weights A** · {rows}×{cols} · to 2 decimals")
    key = f"bare-grid-{problem}-{index}"
    with st.container(key=key):
        numbered = rows * cols > 1
        if numbered:  # the rows numbered by the grid's own CSS, as the app does
            heads = "".join(f'<span class="abh-grid-head">{j + 1}</span>' for j in range(cols))
            st.html(f"<style>.st-key-{key} {{ counter-reset: row; }} .st-key-{key} .stHorizontalBlock::before "
                    f"{{ content: counter(row); counter-increment: row; }}</style>"
                    f'<div class="abh-grid-heads" aria-hidden="true"><span></span>{heads}</div>')
        for i in range(rows):
            with st.container(horizontal=True, gap="small"):
                for j in range(cols):
                    st.text_input(f"A, row {i + 1}, column {j + 1}", key=f"bare.{problem}.{index}.{i}.{j}",
                                  label_visibility="collapsed", placeholder=f"{i + 1},{j + 1}", max_chars=200)
    if checked:
        st.caption("✓ right · ✗ not right yet  \n" + "  \n".join(" ".join("✓" * cols) for _ in range(rows)))


def practice() -> None:
    problem = st.session_state.get("bare.problem", 0)
    checked, solved = st.session_state.get("bare.checked", False), st.session_state.get("bare.solved", False)
    parts = shapes()

    st.title("Practice")
    left, right, button = st.columns([3, 1, 1], vertical_alignment="bottom")
    left.selectbox("Topic", ["a", "b", "c", "d", "e", "f"], key="bare.kind")
    right.selectbox("Level", [1, 2, 3], key="bare.level")
    button.button("New problem", on_click=new_problem, icon=":material/casino:", use_container_width=True)
    st.caption(f"This problem: kind softmax, level 2, seed {problem}. The page address reproduces it.")
    st.markdown("Apply the softmax to each row: a_ij = e^(z_ij) / Σ_j e^(z_ij).")
    st.caption("Round each value you write to 2 decimals.\n\nNo mask applies.")
    given = number("given", 1)
    for start in range(0, given, 3):  # three to a row, in reading order
        row = st.columns(min(given, 3))[:given - start] if given > 1 else [st.container()]
        for offset, column in enumerate(row):
            with column:
                st.latex(content(problem, "given", start + offset))
    st.caption("About 8 minutes by hand (level 2: at most 12).", help="10 s a multiply-add")
    with st.expander("What the levels mean", icon=":material/timer:"):
        st.markdown("- level 1\n- level 2\n- level 3")
    aids = number("aids", 0)
    if aids:
        with st.expander("Aids", expanded=True, icon=":material/calculate:"):
            for index in range(aids):
                st.caption("e^x for the exponents in this problem")
                st.latex(content(problem, "aids", index))
    paper, copy = st.columns([1, 3], vertical_alignment="top")
    paper.download_button("Print this problem", data=b"%PDF", file_name="problem.pdf", mime="application/pdf",
                          key=f"bare.{problem}.print", icon=":material/print:", on_click="ignore")
    with copy.expander("Copy as LaTeX", icon=":material/content_copy:"):
        st.caption("The statement and the given matrices.")
        st.code(matrix(problem), language="latex", wrap_lines=True)

    with st.container(border=True):
        pasteable = [index for index, (rows, cols) in enumerate(parts) if rows * cols > 1]
        if len(pasteable) > 1:
            with st.expander("Paste a whole matrix", icon=":material/content_paste:"):
                for index in pasteable:
                    st.text_area(f"Paste into part {index + 1}", key=f"bare.{problem}.paste.{index}", height=68)
        elif pasteable:
            st.text_area("Paste a whole matrix", key=f"bare.{problem}.paste.0", height=68)
        with st.form(key=f"bare.form.{problem}", border=False):
            for index, (rows, cols) in enumerate(parts):
                grid(problem, index, rows, cols, checked)
            for index in range(number("choices", 0)):
                st.radio("Question", [0, 1, 2, 3], index=None, key=f"bare.{problem}.choice.{index}")
            if checked:
                st.html("<style>" + "".join(f".st-key-bare-{problem}-0-{i}-0 input {{ background: #dfd; }}"
                                            for i in range(parts[0][0])) + "</style>")
            st.form_submit_button("Check", type="primary", on_click=flag, args=("bare.checked",),
                                  icon=":material/done_all:")
    if checked:
        st.error("Score 89%. Not right yet: 8 of 9 cells right.", icon=":material/cancel:")
    with st.expander("Hints (0/3)", icon=":material/lightbulb:"):
        st.caption("Hint 1 any time; one more after each checked answer.")
        st.button("Hint 1: a nudge", key=f"bare.{problem}.hint", icon=":material/lightbulb:")

    if not solved:
        st.button("Show solution", key=f"bare.{problem}.show", on_click=flag, args=("bare.solved",),
                  icon=":material/school:")
        return
    st.subheader("Worked solution")
    st.toggle("Exact forms", value=True, key=f"bare.{problem}.exact")
    for number_ in range(1, number("steps", 1) + 1):
        st.markdown(f"**{number_}. A step**")
        st.latex(content(problem, "steps", number_ - 1))
        st.caption("Why this step is done this way.")
    charts = number("charts", 0)
    if charts:
        st.markdown("**Heatmaps**")
        for column in st.columns(charts):
            with column:
                st.altair_chart(heatmap(number("n", 3)), theme="streamlit")
    st.markdown("**Any cell**")
    left, middle, right = st.columns([3, 1, 1])
    rows, cols = parts[0]
    left.selectbox("Step", range(number("steps", 1)), key=f"bare.{problem}.cell_step")
    middle.selectbox("Row", range(rows), key=f"bare.{problem}.cell_row")
    right.selectbox("Column", range(cols), key=f"bare.{problem}.cell_col")
    st.latex(r"S_{23} = q_2 \cdot k_3 = 0 \cdot 1 + 1 \cdot 1 = 1")


def other() -> None:
    st.title("Another page")


st.set_page_config(page_title="Bare practice", layout="wide")
st.html("<style>.abh-grid-heads { display: flex; }</style>")  # the app's page-wide style and script
st.html("<script>window.__bare = true;</script>", unsafe_allow_javascript=True)
navigation = st.navigation([st.Page(practice, title="Practice", default=True),
                            st.Page(other, title="Home", url_path="home"),
                            st.Page(other, title="Progress", url_path="progress"),
                            st.Page(other, title="Formulas", url_path="formulas")])
st.sidebar.radio("Language", ["English", "简体中文"], key="bare.lang")
st.sidebar.text_input("Profile", value="me", key="bare.profile")
navigation.run()
