"""A learner's progress on a page: the profile box, the standings kept in the session, and the chart.

Every graded attempt on Practice reaches ``on_attempt`` (a listener of ui.attempts) and is stored
through services.progress, so it survives a restart. The analytics themselves (standings, mistakes,
suggestions, the chart's data) live in services.progress; this module only draws and translates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from exercises.i18n import DEFAULT_LANG, catalog
from services import db, progress
from services.progress import (  # noqa: F401  (names Home, the Home map and the pages read from here)
    DEFAULT_PROFILE,
    MASTERED,
    MAX_PROFILE,
    RECENT,
    Standing,
    Suggestion,
    Totals,
    accuracy_frame,
    clean_profile,
    standings,
    suggest,
    top_mistakes,
    totals,
)

from . import attempts as session_attempts
from .i18n import tr

PROFILE_KEY = "progress.profile"
VERSION_KEY = "progress.version"  # bumped on every stored attempt: cached summaries are stale after it
SUMMARY_KEY = "progress.summary"


def profile() -> str:
    return st.session_state.get(PROFILE_KEY, DEFAULT_PROFILE)


def on_attempt(entry: dict[str, Any]) -> None:
    """Store one graded attempt of this session under the current profile (a ui.attempts listener)."""
    try:
        stored = progress.record_attempt(profile(), entry)
    except (db.Unavailable, ValueError):
        st.toast(tr("progress.not_saved"), icon=":material/cloud_off:")
        return
    if stored is not None:
        st.session_state[VERSION_KEY] = st.session_state.get(VERSION_KEY, 0) + 1


def subscribe() -> None:
    """Listen to Practice's attempts (once per process, however often app.py reruns)."""
    names = {(f.__module__, f.__qualname__) for f in session_attempts.LISTENERS}
    if (on_attempt.__module__, on_attempt.__qualname__) not in names:
        session_attempts.LISTENERS.append(on_attempt)


def load(name: str | None = None) -> list[Any]:
    """All stored attempts of a profile (default: the current one), oldest first."""
    try:
        return progress.attempts(name or profile())
    except db.Unavailable:
        st.warning(tr("progress.unavailable"), icon=":material/cloud_off:")
        return []


# ---------------------------------------------------------------- the profile widgets


def _on_profile_change(widget_key: str) -> None:
    name = clean_profile(st.session_state[widget_key])
    if name is None:
        st.toast(tr("profile.invalid", limit=MAX_PROFILE), icon=":material/badge:")
    else:
        st.session_state[PROFILE_KEY] = name


def profile_input(widget_key: str, container: Any = st) -> str:
    """A text box for the profile name (the sidebar and the Progress page share one value)."""
    st.session_state[widget_key] = profile()
    container.text_input(tr("profile.label"), key=widget_key, max_chars=MAX_PROFILE, help=tr("profile.help"),
                         on_change=_on_profile_change, args=(widget_key,))
    return profile()


# ---------------------------------------------------------------- summaries


def suggestion_text(s: Suggestion) -> str:
    recent = "" if s.recent is None else f"{s.recent:.0%}"
    return tr(f"suggest.{s.reason}", topic=tr(f"kind.{s.kind}.title"), level=s.level, recent=recent,
              last=RECENT)


def summary() -> dict[str, Standing]:
    """The current profile's standings, kept in the session until the next stored attempt."""
    state = st.session_state
    stamp = (profile(), state.get(VERSION_KEY, 0), db.url())
    cached = state.get(SUMMARY_KEY)
    if cached is None or cached[0] != stamp:
        cached = (stamp, standings(load()))
        state[SUMMARY_KEY] = cached
    return cached[1]


# ---------------------------------------------------------------- drawing helpers


def topic_label(kind: str) -> str:
    return tr(f"kind.{kind}.title")


def mistake_name(mistake: str) -> str:
    """A short name for a misconception (its explanation when no short name is in the catalog)."""
    key = f"progress.mistake.{mistake}"
    return tr(key) if key in catalog(DEFAULT_LANG) else tr(f"misconception.{mistake}")


TIME_FORMAT = "%m-%d %H:%M"  # month-day hour:minute, read alike in every language


def time_domain(times: pd.Series) -> list[alt.DateTime]:
    """The time axis's range, padded by 5% and at least 30 minutes on each side, so that one attempt
    (or a few within a minute) sits mid-axis under readable ticks, not '.774'."""
    low, high = times.min(), times.max()
    pad = max((high - low) * 0.05, pd.Timedelta(minutes=30))
    return [_datetime(low - pad), _datetime(high + pad)]


def _datetime(moment: pd.Timestamp) -> alt.DateTime:
    utc = moment.tz_convert("UTC")
    return alt.DateTime(year=utc.year, month=utc.month, date=utc.day, hours=utc.hour, minutes=utc.minute,
                        seconds=utc.second, utc=True)


def accuracy_chart(attempts: Sequence[Any]) -> alt.Chart:
    """Running accuracy per topic over time: one line per topic, a point per attempt."""
    frame = accuracy_frame(attempts, topic_label)
    frame["at"] = pd.to_datetime(frame["at"], utc=True)
    base = alt.Chart(frame).encode(
        x=alt.X("at:T", title=tr("progress.axis.time"), scale=alt.Scale(domain=time_domain(frame["at"])),
                axis=alt.Axis(format=TIME_FORMAT, labelAngle=0, labelOverlap=True, tickCount=6)),
        y=alt.Y("accuracy:Q", title=tr("progress.axis.accuracy"), scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%")),
        color=alt.Color("topic:N", title=tr("progress.axis.topic")),
    )
    tooltip = [alt.Tooltip("topic:N", title=tr("progress.axis.topic")),
               alt.Tooltip("level:O", title=tr("progress.axis.level")),
               alt.Tooltip("score:Q", title=tr("progress.axis.score"), format=".0%"),
               alt.Tooltip("accuracy:Q", title=tr("progress.axis.accuracy"), format=".0%"),
               alt.Tooltip("at:T", title=tr("progress.axis.time"), format="%Y-%m-%d %H:%M")]
    return base.mark_line() + base.mark_point(filled=True, size=50).encode(tooltip=tooltip)


def topic_table(table: dict[str, Standing]) -> pd.DataFrame:
    """One row per topic tried, in pipeline order, with translated column names."""
    rows = [{tr("progress.col.topic"): topic_label(kind), tr("progress.col.attempts"): s.attempts,
             tr("progress.col.best"): f"{s.best:.0%}", tr("progress.col.mean"): f"{s.mean:.0%}",
             tr("progress.col.recent"): f"{s.recent:.0%}", tr("progress.col.level"): s.level}
            for kind, s in progress.in_pipeline_order(table)]
    return pd.DataFrame(rows)
