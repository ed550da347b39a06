"""The time budget shown with a problem: "about N minutes" by hand, and what each level means.

The minutes come from exercises.core.budget (an operation count at stated rates); this module only draws.
"""

from __future__ import annotations

import streamlit as st

from exercises import Exercise
from exercises.core import budget, engine

from .i18n import tr


def show(ex: Exercise) -> int:
    """A caption with the exercise's hand time and an expander with one line per level; returns the
    minutes shown."""
    minutes = engine.about_minutes(ex)
    st.caption(tr("budget.about", minutes=minutes, level=ex.level, budget=int(budget.BUDGET_MINUTES[ex.level])),
               help=tr("budget.rates", **{op: f"{seconds:g}" for op, seconds in budget.RATES.items()}))
    with st.expander(tr("budget.levels"), icon=":material/timer:"):
        st.markdown("\n".join(f"- {tr(f'budget.level.{level}')}" for level in budget.BUDGET_MINUTES))
    return minutes
