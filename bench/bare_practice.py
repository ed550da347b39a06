"""A bare Practice page: the same Streamlit elements as app_pages/practice.py, and no logic at all.

bench/bench_page.py runs it next to the real page to price what the app adds to Streamlit's own cost.
How many of each element to draw comes from the URL (the bench reads it off the real page):

    rows, cols   answer cells            given   LaTeX blocks of the problem
    aids         LaTeX blocks of aids    steps   solution steps
    charts       heatmaps (0–2)          n       heatmap size (n × n)

Everything drawn is a constant; the buttons only flip flags. Run alone: streamlit run bench/bare_practice.py
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

MATRIX = r"\begin{bmatrix} 1 & 0 & -2 \\ 0.5 & 2 & 1 \\ -1 & 1 & 0 \end{bmatrix}"
STEP = r"\begin{aligned} S &= Q K^{\top} \\ &= " + MATRIX + r" \\ &\approx " + MATRIX + r"\end{aligned}"


def number(name: str, default: int) -> int:
    try:
        return int(st.query_params.get(name, default))
    except ValueError:
        return default


def flag(name: str) -> None:
    st.session_state[name] = True


def new_problem() -> None:
    st.session_state["bare.problem"] = st.session_state.get("bare.problem", 0) + 1
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


def practice() -> None:
    rows, cols = number("rows", 3), number("cols", 3)
    problem = st.session_state.get("bare.problem", 0)
    checked, solved = st.session_state.get("bare.checked", False), st.session_state.get("bare.solved", False)

    st.title("Practice")
    left, right, button = st.columns([3, 1, 1], vertical_alignment="bottom")
    left.selectbox("Topic", ["a", "b", "c", "d", "e", "f"], key="bare.kind")
    right.selectbox("Level", [1, 2, 3], key="bare.level")
    button.button("New problem", on_click=new_problem, icon=":material/casino:", use_container_width=True)
    st.caption("This problem: kind softmax, level 2, seed 5. The page address reproduces it.")
    st.markdown("Apply the softmax to each row: a_ij = e^(z_ij) / Σ_j e^(z_ij).")
    given = number("given", 1)
    columns = st.columns(min(given, 3) or 1)
    for index in range(given):
        with columns[index % len(columns)]:
            st.latex(MATRIX)
    aids = number("aids", 0)
    if aids:
        with st.expander("Aids", expanded=True, icon=":material/calculate:"):
            for _ in range(aids):
                st.caption("e^x for the exponents in this problem")
                st.latex(MATRIX)

    with st.form(key=f"bare.form.{problem}", border=True):
        st.markdown(f"**the attention weights A** · {rows}×{cols} · to 2 decimals")
        for i in range(rows):
            cells = st.columns(cols, gap="small")
            for j in range(cols):
                with cells[j]:
                    st.text_input(f"A, row {i + 1}, column {j + 1}", key=f"bare.{problem}.{i}.{j}",
                                  label_visibility="collapsed", placeholder=f"{i + 1},{j + 1}")
        st.text_area("…or paste the whole matrix", key=f"bare.{problem}.paste", height=68)
        if checked:
            st.caption("✓ right · ✗ not right yet  \n" + "  \n".join(" ".join("✓" * cols) for _ in range(rows)))
            st.html("<style>" + "".join(f".st-key-bare-{problem}-{i}-{j} input {{ background: #dfd; }}"
                                        for i in range(rows) for j in range(cols)) + "</style>")
        st.form_submit_button("Check", type="primary", on_click=flag, args=("bare.checked",),
                              icon=":material/done_all:")
    if checked:
        st.error("Score 89%. Not right yet: 8 of 9 cells right.", icon=":material/cancel:")

    if not solved:
        st.button("Show solution", key=f"bare.{problem}.show", on_click=flag, args=("bare.solved",),
                  icon=":material/school:")
        return
    st.subheader("Worked solution")
    st.toggle("Exact forms", value=True, key=f"bare.{problem}.exact")
    for number_ in range(1, number("steps", 1) + 1):
        st.markdown(f"**{number_}. A step**")
        st.latex(STEP)
        st.caption("Why this step is done this way.")
    charts = number("charts", 0)
    if charts:
        st.markdown("**Heatmaps**")
        for column in st.columns(charts):
            with column:
                st.altair_chart(heatmap(number("n", 3)), theme="streamlit")
    st.markdown("**Any cell**")
    left, middle, right = st.columns([3, 1, 1])
    left.selectbox("Step", range(number("steps", 1)), key=f"bare.{problem}.cell_step")
    middle.selectbox("Row", range(rows), key=f"bare.{problem}.cell_row")
    right.selectbox("Column", range(cols), key=f"bare.{problem}.cell_col")
    st.latex(r"S_{23} = q_2 \cdot k_3 = 0 \cdot 1 + 1 \cdot 1 = 1")


def other() -> None:
    st.title("Another page")


st.set_page_config(page_title="Bare practice", layout="wide")
navigation = st.navigation([st.Page(practice, title="Practice", default=True),
                            st.Page(other, title="Home", url_path="home"),
                            st.Page(other, title="Progress", url_path="progress"),
                            st.Page(other, title="Formulas", url_path="formulas")])
st.sidebar.radio("Language", ["English", "简体中文"], key="bare.lang")
st.sidebar.text_input("Profile", value="me", key="bare.profile")
navigation.run()
