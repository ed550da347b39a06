"""The formula sheet: every formula the exercises use, forward and backward, with shapes.

Notation as in exercises/rendering/latex.py (the solutions): n tokens, model width d, key width d_k, value width
d_v, h heads, vocabulary size m; S = QKᵀ the scores, Z = S/√d_k the scaled scores, Z̃ the masked ones,
A the weights, O the output; G_Y = ∂L/∂Y has the shape of Y (G_Z, G_S for the scaled and raw scores).

Each kind brings its own section (``SHEET`` in exercises/kinds/<id>/); the few sections that belong
to no kind are here. Within a tab, sections are sorted by position (a kind's defaults to its ORDER).
In the sources ``[[Q | n | d_k]]`` writes Q with its shape (rows × columns) underneath.
"""

from __future__ import annotations

import exercises
from exercises.core.contract import shaped
from exercises.core.engine import Formula, SheetSection

TAB_KEY = "formulas.tab"  # + the language (ui.i18n.lang_key): the open tab, forward or backward
Section = SheetSection
F = Formula
__all__ = ["SHARED", "Formula", "Section", "all_latex", "backward", "forward", "note_keys", "sections", "shaped"]

# sections of no kind: the notation first, the embedding before the projections (the multi-head backward
# is the grad_multi_head kind's own section)
SHARED: tuple[Section, ...] = (
    Section("forward", (
        F(r"n, \quad d, \quad d_k, \quad d_v, \quad h, \quad m", "formulas.notation.sizes"),
        F(r"G_Y = \frac{\partial L}{\partial Y}, \qquad \operatorname{shape}(G_Y) = \operatorname{shape}(Y)",
          "formulas.notation.grad"),
    ), key="notation", position=0),
    Section("forward", (
        F(r"[[X | n | d]], \qquad x_{i} = E[t_{i}], \qquad E \in \mathbb{R}^{m \times d}",
          "formulas.embedding.lookup"),
    ), key="embedding", position=5),
)


def sections(tab: str | None = None) -> list[Section]:
    """The sheet's sections (of one tab, or forward then backward), from the kind registry and SHARED."""
    found = list(SHARED) + [k.sheet for k in exercises.KINDS.values() if k.sheet is not None]
    tabs = [tab] if tab is not None else ["forward", "backward"]
    return [s for t in tabs for s in sorted((s for s in found if s.tab == t), key=lambda s: s.position)]


def forward() -> list[Section]:
    return sections("forward")


def backward() -> list[Section]:
    return sections("backward")


def all_latex() -> list[str]:
    """Every LaTeX string of the sheet (for tests)."""
    return [f.latex for s in sections() for f in s.formulas]


def note_keys() -> list[str]:
    """Every catalog key the sheet uses."""
    return [key for s in sections() for key in s.keys()]
