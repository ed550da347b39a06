"""The attention pipeline as a map of stages, each linked to its practice kind with the learner's standing.

The stages are a constant table (which kind, which formula); drawing reads one small summary of the
learner's attempts (ui.progress.summary), so a rerun of Home costs no query unless an attempt was stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import exercises

from .i18n import tr
from .progress import MASTERED, Standing


@dataclass(frozen=True)
class Stage:
    kind: str
    formula: str  # inline LaTeX, the notation of exercises/latex.py


FORWARD_PATH = r"X \to Q,\,K,\,V \to QK^{\top} \to \div\sqrt{d_k} \to \text{mask} \to \text{softmax} \to \cdot\,V \to O"
BACKWARD_PATH = (r"G_O \to G_A,\,G_V \to G_Z \to G_S \to G_Q,\,G_K \to G_{W_Q},\,G_{W_K},\,G_{W_V},\,G_X"
                 r" \to G_E")

FORWARD = (
    Stage("projection", r"Q = XW_Q,\ K = XW_K,\ V = XW_V"),
    Stage("scores", r"S = QK^{\top}"),
    Stage("scaling", r"Z = S / \sqrt{d_k}"),
    Stage("masking", r"\tilde{Z}_{ij} = -\infty \ (j > i)"),
    Stage("softmax", r"A = \operatorname{softmax}(\tilde{Z})"),
    Stage("weighted_sum", r"O = AV"),
)
BACKWARD = (
    Stage("grad_weighted_sum", r"G_A = G_O V^{\top},\ G_V = A^{\top} G_O"),
    Stage("grad_value_proj", r"G_{W_V} = X^{\top} G_V"),
    Stage("grad_softmax", r"G_Z = A \odot (G_A - \operatorname{rowsum}(A \odot G_A))"),
    Stage("grad_scores", r"G_Q = G_S K,\ G_K = G_S^{\top} Q"),
    Stage("grad_projections", r"G_{W_Q} = X^{\top} G_Q,\ G_X"),
    Stage("grad_embedding", r"G_E \mathrel{+}= G_X"),
)
WHOLE = (Stage("attention", r"X \to O"), Stage("backprop", r"G_O \to G_X"))
AROUND = (
    Stage("multi_head", r"[\,\mathrm{head}_1 \mid \dots \mid \mathrm{head}_h\,]\,W_O"),
    Stage("shapes", r"(n \times d_k)(d_k \times n)"),
    Stage("variance", r"\operatorname{Var}(q \cdot k) = d_k"),
    Stage("concepts", r"Q,\ K,\ V"),
)


def mapped_kinds() -> set[str]:
    return {s.kind for group in (FORWARD, BACKWARD, WHOLE, AROUND) for s in group}


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
