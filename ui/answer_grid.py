"""The answer grid: one text cell per matrix entry, a paste box per part, marks after a check.

Widget keys are plain strings built from the exercise id, so a new problem gets fresh, empty cells
and a rerun keeps whatever the learner typed.
"""

from __future__ import annotations

import streamlit as st

from exercises import Exercise, Feedback, Part

from .i18n import lang_key, render, tr

MARK = {"right": "✓", "wrong": "✗", "consistent": "≈"}
TINT = {"right": "rgba(33, 195, 84, 0.22)", "wrong": "rgba(255, 75, 75, 0.22)",
        "consistent": "rgba(255, 170, 0, 0.25)", "error": "rgba(255, 75, 75, 0.10)"}


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "-" for ch in text)


def cell_key(prefix: str, part: str, i: int, j: int) -> str:
    return _slug(f"{prefix}-{part}-{i}-{j}")


def paste_key(prefix: str, part: str) -> str:
    return _slug(f"{prefix}-{part}-paste")


def choice_key(prefix: str, part: str) -> str:
    """Options are translated: one widget per language, a switch carries the choice over."""
    return lang_key(_slug(f"{prefix}-{part}-choice"), carry=True)


def part_heading(part: Part) -> str:
    rows, cols = part.shape
    how = tr("grid.exact") if part.decimals == 0 else tr("grid.decimals", decimals=part.decimals)
    return f"**{tr('part.' + part.name)}** · {rows}×{cols} · {how}"


def draw(ex: Exercise, prefix: str, fb: Feedback | None = None, disabled: bool = False) -> None:
    """Draw every part's cells (call inside an st.form). Marks and cell errors come from `fb`."""
    styles = []
    for part in ex.parts:
        pfb = fb.parts.get(part.name) if fb is not None else None
        if part.prompt:
            st.markdown(tr(part.prompt, **part.params))
        if part.is_choice:
            _draw_choice(part, prefix, disabled)
        else:
            st.markdown(part_heading(part))
            _draw_cells(part, prefix, pfb, disabled, styles)
            st.text_area(tr("grid.paste_label"), key=paste_key(prefix, part.name), height=68,
                         placeholder=tr("grid.paste_placeholder"), disabled=disabled)
        if pfb is not None and pfb.format_error is not None and not pfb.cell_errors:
            st.error(render(pfb.format_error), icon=":material/edit_note:")
        if pfb is not None and pfb.status is not None and not part.is_choice:
            marks = "  \n".join(" ".join(MARK[s] for s in row) for row in pfb.status)
            st.caption(tr("grid.marks_legend") + "  \n" + marks)
    if styles:
        st.html("<style>" + "".join(styles) + "</style>")


def _draw_cells(part: Part, prefix: str, pfb, disabled: bool, styles: list[str]) -> None:
    rows, cols = part.shape
    for i in range(rows):
        columns = st.columns(cols, gap="small")
        for j in range(cols):
            key = cell_key(prefix, part.name, i, j)
            with columns[j]:
                st.text_input(tr("grid.cell_label", part=part.name, row=i + 1, col=j + 1), key=key,
                              label_visibility="collapsed", placeholder=f"{i + 1},{j + 1}", disabled=disabled)
                error = pfb.cell_errors.get((i, j)) if pfb is not None else None
                if error is not None:
                    st.caption(":red[" + render(error) + "]")
                    styles.append(_tint(key, "error"))
                elif pfb is not None and pfb.status is not None:
                    styles.append(_tint(key, pfb.status[i, j]))


def _tint(key: str, status: str) -> str:
    return f".st-key-{key} input {{ background-color: {TINT[status]}; }}"


def _draw_choice(part: Part, prefix: str, disabled: bool) -> None:
    letters = [chr(ord("A") + i) for i in range(len(part.options))]
    st.radio(tr("part." + part.name), options=list(range(len(part.options))), index=None,
             format_func=lambda i: f"{letters[i]}. {tr(part.options[i], **part.params)}",
             key=choice_key(prefix, part.name), disabled=disabled)


def collect(ex: Exercise, prefix: str) -> dict[str, object]:
    """The learner's answer as {part: paste text | grid of cell texts | option index}.
    A non-empty paste box wins over the cells of its part."""
    state = st.session_state
    answer: dict[str, object] = {}
    for part in ex.parts:
        if part.is_choice:
            answer[part.name] = state.get(choice_key(prefix, part.name))
            continue
        pasted = (state.get(paste_key(prefix, part.name)) or "").strip()
        if pasted:
            answer[part.name] = pasted
        else:
            rows, cols = part.shape
            answer[part.name] = [[state.get(cell_key(prefix, part.name, i, j)) or "" for j in range(cols)]
                                 for i in range(rows)]
    return answer
