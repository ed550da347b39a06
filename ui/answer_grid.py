"""The answer grid: one text cell per matrix entry, a paste box per part, marks after a check.

Widget keys are plain strings built from a prefix the page chooses; a rerun keeps whatever the learner
typed. Practice's prefix names the kind and level, not the problem: a new problem of the same kind and
level reuses the boxes on screen (the browser redraws their text, not the boxes), and clear() empties
them first.

Two ways to use it. Practice keeps one answer input, the grid: `paste_boxes()` (outside the form)
puts a pasted matrix into the grid's cells the moment it changes, `fill_from_pastes()` does the same
in a Check callback, and the grid is what is graded. The assignment page draws the paste boxes inside
its form (`draw(..., paste=True)`), where a non-empty box is graded instead of its part's cells
(`collect()`). Either way `draw()` colours only what was graded: a cell keeps its mark only while it
shows the text that was graded.
"""

from __future__ import annotations

import re

import numpy as np
import streamlit as st

from exercises import AnswerError, Exercise, Feedback, Part, parse_answer
from exercises.core.parser import MAX_CELL_CHARS, MAX_MATRIX_CHARS
from exercises.i18n import msg, part_key, t

from . import theme
from .i18n import lang as current_lang
from .i18n import lang_key, render, tr

MARK = {"right": "✓", "wrong": "✗", "consistent": "≈"}
TINT = {"right": "rgba(33, 195, 84, 0.22)", "wrong": "rgba(255, 75, 75, 0.22)",
        "consistent": "rgba(255, 170, 0, 0.25)", "error": "rgba(255, 75, 75, 0.10)"}


_NOT_KEY = re.compile(r"[^\w-]")  # \w: what str.isalnum() accepts, and _


def _slug(text: str) -> str:
    """`text` as a widget key Streamlit writes into a CSS class: any other character becomes -."""
    return _NOT_KEY.sub("-", text)


def cell_key(prefix: str, part: str, i: int, j: int) -> str:
    return _slug(f"{prefix}-{part}-{i}-{j}")


def grid_key(prefix: str, part: str) -> str:
    """The key of the container that holds the cells of `part` (ui/theme styles it: a grid stays a grid)."""
    return _slug(f"abh-grid-{prefix}-{part}")


def paste_key(prefix: str, part: str) -> str:
    return _slug(f"{prefix}-{part}-paste")


# A paste box's bookkeeping in session state (no widget): its key + one of these
ROUND, ERROR, FILLED = ".round", ".error", ".filled"


def round_key(prefix: str, part: str) -> str:
    """How many pastes went into the grid of `part` (session state; 0 when none)."""
    return paste_key(prefix, part) + ROUND


def cells_prefix(prefix: str, part: str, paste_round: int = 0) -> str:
    """The prefix of the cell keys of `part` after `paste_round` pastes. A paste gives the cells new
    keys: in a form, what the learner typed and has not submitted yet stays in the browser and would
    come back at Check over the values the paste wrote; under new keys it is gone with the old cells."""
    return prefix if paste_round == 0 else f"{prefix}-p{paste_round}"


def _live(prefix: str, part: str) -> str:
    return cells_prefix(prefix, part, st.session_state.get(round_key(prefix, part), 0))


def choice_key(prefix: str, part: str) -> str:
    """Options are translated: one widget per language, a switch carries the choice over."""
    return lang_key(_slug(f"{prefix}-{part}-choice"), carry=True)


def clear(prefix: str) -> None:
    """Empty every cell, paste box and choice whose key starts with `prefix` (the widgets keep their keys)
    and forget its pastes: what the grid held belonged to another problem."""
    state = st.session_state
    for key in [k for k in state if isinstance(k, str) and k.startswith(prefix + "-")]:
        if key.endswith((ROUND, ERROR, FILLED)):  # paste bookkeeping, not a widget
            del state[key]
        else:
            state[key] = "" if isinstance(state[key], str) else None


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def cell_label(part_name: str, row: int, col: int, lang: str | None = None, kind: str | None = None) -> str:
    """A cell's accessible name (1-based row and column): the part's label from the catalog, as the
    heading above the grid writes it ("The scaled scores S / √d_k, row 1, column 1"; a kind's own name
    where it has one, RoPE's rotated scores), never its internal name."""
    lang = lang or current_lang()
    return t("grid.cell_label", lang, part=_capitalized(t(part_key(part_name, kind), lang)), row=row, col=col)


def part_heading(part: Part, kind: str | None = None) -> str:
    """Bold name (its first letter a capital), shape, and how to write the entries (−∞ when needed)."""
    rows, cols = part.shape
    if part.decimals == 0:
        needs_inf = np.isinf(np.asarray(part.reference, dtype=float)).any()
        how = tr("grid.exact_inf" if needs_inf else "grid.exact")
    else:
        how = tr("grid.decimals", decimals=part.decimals)
    return f"**{_capitalized(tr(part_key(part.name, kind)))}** · {rows}×{cols} · {how}"


def draw(ex: Exercise, prefix: str, fb: Feedback | None = None, disabled: bool = False, *,
         graded: dict[str, object] | None = None, paste: bool = True) -> None:
    """Draw every part's cells (call inside an st.form). Marks and cell errors come from `fb`, and go
    only on what it graded: `graded` is the answer `fb` grades (as collect() gave it); without it, the
    answer collect() reads now (in a form, what was submitted). A cell changed since keeps no mark.
    `paste=False` leaves the paste boxes out (Practice draws paste_boxes() outside its form)."""
    if fb is not None and graded is None:
        graded = collect(ex, prefix)
    styles: list[str] = []
    for part in ex.parts:
        pfb = fb.parts.get(part.name) if fb is not None else None
        answer = graded.get(part.name) if graded is not None else None
        was_pasted = isinstance(answer, str)  # its marks belong to the paste box's text, not the cells
        if part.prompt:
            st.markdown(tr(part.prompt, **part.params))
        if part.is_choice:
            _draw_choice(part, prefix, disabled, ex.kind)
            shown = None
        else:
            st.markdown(part_heading(part, ex.kind))
            shown = _still_shown(part, prefix, answer) if pfb is not None and not was_pasted else None
            _draw_cells(part, prefix, pfb, shown, disabled, styles, ex.kind)
            if paste:
                st.text_area(tr("grid.paste_label"), key=paste_key(prefix, part.name), height=68,
                             placeholder=tr("grid.paste_placeholder"), disabled=disabled, max_chars=MAX_MATRIX_CHARS)
        if pfb is None:
            continue
        if pfb.format_error is not None and (shown is None or not pfb.cell_errors):
            st.error(render(pfb.format_error), icon=":material/edit_note:")
        if pfb.status is not None and not part.is_choice and (shown is None or shown.all()):
            marks = "  \n".join(" ".join(MARK[s] for s in row) for row in pfb.status)
            st.caption(tr("grid.marks_legend") + "  \n" + marks)
    if styles:
        st.html("<style>" + "".join(styles) + "</style>")


def _draw_cells(part: Part, prefix: str, pfb, shown: np.ndarray | None, disabled: bool,
                styles: list[str], kind: str | None = None) -> None:
    """The cells of one part; `shown` marks the cells that still hold the text `pfb` graded.

    A row is one horizontal container of its cells (its number drawn by the grid's CSS), the column
    numbers one line of HTML over them: a 3×3 grid is 13 page elements where st.columns made it 35,
    and a page's cost, on the server and in the browser, grows with its elements."""
    rows, cols = part.shape
    numbered = rows * cols > 1
    key = grid_key(prefix, part.name)
    with st.container(key=key):
        style = theme.grid_style(key, numbered)
        if numbered:  # column numbers over the cells: a filled cell loses its "r,c" placeholder
            heads = "".join(f'<span class="abh-grid-head">{j + 1}</span>' for j in range(cols))
            st.html(f'{style}<div class="abh-grid-heads" aria-hidden="true"><span></span>{heads}</div>')
        else:
            st.html(style)
        live = _live(prefix, part.name)  # the cells' key prefix: read once, not once a cell
        for i in range(rows):
            _draw_row(part, live, pfb, shown, disabled, styles, i, kind)


def _draw_row(part: Part, live: str, pfb, shown: np.ndarray | None, disabled: bool, styles: list[str],
              i: int, kind: str | None = None) -> None:
    """Row i of the cells (the grid's CSS numbers it and keeps it one row on a phone); the cells'
    format errors go under the row (each message names its row and column)."""
    cols = part.shape[1]
    errors: list[str] = []
    with st.container(horizontal=True, gap="small"):
        for j in range(cols):
            key = cell_key(live, part.name, i, j)
            st.text_input(cell_label(part.name, i + 1, j + 1, kind=kind), key=key,
                          label_visibility="collapsed", placeholder=f"{i + 1},{j + 1}", disabled=disabled,
                          max_chars=MAX_CELL_CHARS)
            if shown is None or not shown[i, j]:
                continue
            error = pfb.cell_errors.get((i, j))
            if error is not None:
                errors.append(render(error))  # the message names its row and column
                styles.append(_tint(key, "error"))
            elif pfb.status is not None:
                styles.append(_tint(key, pfb.status[i, j]))
    if errors:
        st.caption(":red[" + "  \n".join(errors) + "]")


def _tint(key: str, status: str) -> str:
    return f".st-key-{key} input {{ background-color: {TINT[status]}; }}"


def _draw_choice(part: Part, prefix: str, disabled: bool, kind: str | None = None) -> None:
    letters = [chr(ord("A") + i) for i in range(len(part.options))]
    st.radio(tr(part_key(part.name, kind)), options=list(range(len(part.options))), index=None,
             format_func=lambda i: f"{letters[i]}. {tr(part.options[i], **part.params)}",
             key=choice_key(prefix, part.name), disabled=disabled)


def _grid_texts(part: Part, prefix: str) -> list[list[str]]:
    """What each cell of `part` holds now ("" when empty)."""
    rows, cols = part.shape
    state, live = st.session_state, _live(prefix, part.name)
    return [[state.get(cell_key(live, part.name, i, j)) or "" for j in range(cols)] for i in range(rows)]


def _still_shown(part: Part, prefix: str, answer: object) -> np.ndarray:
    """Per cell: does it hold the text that was graded (`answer`, a grid of cell texts)?"""
    shown = np.zeros(part.shape, dtype=bool)
    if not isinstance(answer, (list, tuple)):
        return shown
    for i, row in enumerate(_grid_texts(part, prefix)):
        for j, text in enumerate(row):
            graded_row = answer[i] if i < len(answer) else ()
            shown[i, j] = j < len(graded_row) and text == (graded_row[j] or "")
    return shown


def still_shows(ex: Exercise, prefix: str, graded: dict[str, object]) -> bool:
    """True while every grid holds exactly the cell texts of `graded` (as collect() gave it)."""
    return all(_still_shown(part, prefix, graded.get(part.name)).all()
               for part in ex.parts if not part.is_choice)


def collect(ex: Exercise, prefix: str) -> dict[str, object]:
    """The learner's answer as {part: paste text | grid of cell texts | option index}.
    A non-empty paste box wins over the cells of its part (Practice empties its boxes into the grid
    first: fill_from_pastes)."""
    state = st.session_state
    answer: dict[str, object] = {}
    for part in ex.parts:
        if part.is_choice:
            answer[part.name] = state.get(choice_key(prefix, part.name))
            continue
        pasted = (state.get(paste_key(prefix, part.name)) or "").strip()
        answer[part.name] = pasted if pasted else _grid_texts(part, prefix)
    return answer


# ---------------------------------------------------------------- pasting into the grid


def _paste_error_key(prefix: str, part: str) -> str:
    return paste_key(prefix, part) + ERROR


def _paste_filled_key(prefix: str, part: str) -> str:
    return paste_key(prefix, part) + FILLED


def pasteable(ex: Exercise) -> list[Part]:
    """The parts a whole matrix can be pasted into (a single number needs no paste box)."""
    return [part for part in ex.parts if not part.is_choice and part.shape[0] * part.shape[1] > 1]


def paste_boxes(ex: Exercise, prefix: str) -> None:
    """A paste box per matrix part, drawn outside a form: what is pasted goes into the part's grid as
    soon as the box changes, and the box empties; text that cannot be read stays, its reason under it."""
    parts = pasteable(ex)
    if len(parts) > 1:
        with st.expander(tr("grid.paste_many"), icon=":material/content_paste:"):
            for part in parts:
                _paste_box(ex, prefix, part, tr("grid.paste_fill_part_label", part=tr(part_key(part.name, ex.kind))))
    elif parts:
        _paste_box(ex, prefix, parts[0], tr("grid.paste_fill_label"))


def _paste_box(ex: Exercise, prefix: str, part: Part, label: str) -> None:
    st.text_area(label, key=paste_key(prefix, part.name), height=68, placeholder=tr("grid.paste_placeholder"),
                 on_change=fill_from_paste, args=(ex, prefix, part.name), max_chars=MAX_MATRIX_CHARS)
    state = st.session_state
    error = state.get(_paste_error_key(prefix, part.name))
    if error is not None:
        st.error(render(msg("grid.paste_unread", error=error)), icon=":material/content_paste_off:")
    elif state.pop(_paste_filled_key(prefix, part.name), False):
        st.caption(":material/check: " + tr("grid.paste_filled", part=tr(part_key(part.name, ex.kind))))


def fill_from_paste(ex: Exercise, prefix: str, name: str) -> bool:
    """Callback: put the matrix in the paste box of part `name` into its grid and empty the box.
    False when the text cannot be read or has another shape: the box keeps it, the reason is kept
    for the box to show, and the grid is left as it was. An empty box changes nothing."""
    state = st.session_state
    key, error_key = paste_key(prefix, name), _paste_error_key(prefix, name)
    state.pop(error_key, None)
    text = state.get(key) or ""
    if not text.strip():
        return True
    part = ex.part(name)
    label = msg(part_key(name, ex.kind))
    try:
        value = parse_answer(text, msg("where.part", part=label))
    except AnswerError as err:
        state[error_key] = err.message
        return False
    if value.shape != part.shape:
        state[error_key] = msg("grade.shape", part=label, expected_rows=part.shape[0], expected_cols=part.shape[1],
                               got_rows=value.shape[0], got_cols=value.shape[1])
        return False
    paste_round = state.get(round_key(prefix, name), 0) + 1
    state[round_key(prefix, name)] = paste_round
    for (i, j), x in np.ndenumerate(value):
        state[cell_key(cells_prefix(prefix, name, paste_round), name, i, j)] = cell_text(x)
    state[key] = ""
    state[_paste_filled_key(prefix, name)] = True
    return True


def fill_from_pastes(ex: Exercise, prefix: str) -> bool:
    """fill_from_paste() for every part (call first in a Check callback); False when a box holds
    text that could not go into its grid."""
    results = [fill_from_paste(ex, prefix, part.name) for part in ex.parts if not part.is_choice]
    return all(results)


def cell_text(x: float) -> str:
    """A pasted value as its cell shows it: a whole number plainly, −∞ as -inf, else 12 significant
    digits (an expression such as e/(1+e) becomes the number it reads as)."""
    if np.isinf(x):
        return "-inf" if x < 0 else "inf"
    if float(x).is_integer() and abs(x) < 1e12:
        return str(int(x))
    return f"{x:.12g}"
