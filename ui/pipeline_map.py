"""The attention pipeline as a map of stages, each linked to its practice kind with the learner's standing.

Each kind declares its stage (``HOME`` in exercises/kinds/<id>/: its row and formula); the rows are
drawn in pipeline order (the kinds' ORDER). Drawing reads one small summary of the learner's attempts
(ui.progress.summary), so a rerun of Home costs no query unless an attempt was stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import exercises
from services.progress import MASTERED, Standing

from .i18n import tr


@dataclass(frozen=True)
class Stage:
    kind: str
    formula: str  # inline LaTeX, the notation of exercises/rendering/latex.py


@dataclass(frozen=True)
class Row:
    """One row of the map: its heading (catalog keys), the path drawn above it, how its cards sit."""

    key: str  # a HomeStage row: forward, backward, whole, around
    title: str
    caption: str | None = None
    path: str | None = None
    numbered: bool = True
    per_row: int = 3


FORWARD_PATH = r"X \to Q,\,K,\,V \to QK^{\top} \to \div\sqrt{d_k} \to \text{mask} \to \text{softmax} \to \cdot\,V \to O"
BACKWARD_PATH = (r"G_O \to G_A,\,G_V \to G_Z \to G_S \to G_Q,\,G_K \to G_{W_Q},\,G_{W_K},\,G_{W_V},\,G_X"
                 r" \to G_E")

ROWS = (
    Row("forward", "home.forward", "home.forward_caption", FORWARD_PATH),
    Row("backward", "home.backward", "home.backward_caption", BACKWARD_PATH),
    Row("whole", "home.whole", numbered=False, per_row=2),
    Row("around", "home.around", numbered=False, per_row=2),  # 4 abreast clips "Shapes through attention"
)


def stages(row: str) -> tuple[Stage, ...]:
    """The stages of one row, in the kinds' menu order."""
    return tuple(Stage(k.ID, k.home.formula) for k in exercises.KINDS.values()
                 if k.home is not None and k.home.row == row)


def unmapped() -> tuple[Stage, ...]:
    """Kinds with no Home stage of their own: shown together under "more"."""
    return tuple(Stage(k.ID, "") for k in exercises.KINDS.values() if k.home is None)


def mapped_kinds() -> set[str]:
    return {k.ID for k in exercises.KINDS.values() if k.home is not None}


def standing_text(standing: Standing | None) -> str:
    if standing is None:
        return tr("home.untried")
    return tr("home.standing", attempts=standing.attempts, best=f"{standing.best:.0%}",
              mean=f"{standing.mean:.0%}")


def standing_icon(standing: Standing | None) -> str:
    if standing is None:
        return ":material/radio_button_unchecked:"
    return ":material/check_circle:" if standing.recent >= MASTERED else ":material/pending:"


def practice_link(kind: str, level: int = 1, label: str | None = None, icon: str | None = None) -> None:
    """A link into Practice for `kind` at `level` (a fresh problem)."""
    st.page_link("app_pages/practice.py", label=label or tr(f"kind.{kind}.title"), icon=icon,
                 query_params={"kind": kind, "level": str(level)})


def stage_card(stage: Stage, number: int | None, table: dict[str, Standing]) -> None:
    """One stage: its formula, a link into its practice, what it is about, and where the learner stands."""
    standing = table.get(stage.kind)
    with st.container(border=True):
        if stage.formula:
            st.markdown((f"{number}. " if number is not None else "") + f"${stage.formula}$")
        if stage.kind in exercises.KINDS:
            level = standing.level if standing is not None else exercises.KINDS[stage.kind].LEVELS[0]
            practice_link(stage.kind, level, icon=standing_icon(standing))
            st.caption(tr(f"kind.{stage.kind}.summary"))
        else:
            st.caption(tr("home.not_yet"))
        st.caption(standing_text(standing))


def draw_row(stages: tuple[Stage, ...], table: dict[str, Standing], numbered: bool = True,
             per_row: int = 3) -> None:
    """Stages left to right, `per_row` to a row, numbered in pipeline order."""
    for start in range(0, len(stages), per_row):
        columns = st.columns(per_row)
        for offset, stage in enumerate(stages[start:start + per_row]):
            with columns[offset]:
                stage_card(stage, start + offset + 1 if numbered else None, table)
