"""A learner's progress: graded attempts stored under a local profile name, and what they add up to.

Every graded attempt on Practice reaches ``on_attempt`` (a listener of ui.attempts) and is written
through the storage layer, so it survives a restart. The summaries below are plain functions of a
list of attempts (anything with kind, level, score, misconception, hints_used, seconds, at).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd
import sqlalchemy as sa
import streamlit as st

import exercises
import storage
from exercises.i18n import DEFAULT_LANG, catalog

from . import attempts as session_attempts
from .i18n import tr

PROFILE_KEY = "progress.profile"
VERSION_KEY = "progress.version"  # bumped on every stored attempt: cached summaries are stale after it
SUMMARY_KEY = "progress.summary"
DEFAULT_PROFILE = "me"
MAX_PROFILE = 40
RECENT = 5  # a topic's standing is judged on its last few attempts
MASTERED = 0.8  # mean score over the recent attempts at which a topic counts as done


# ---------------------------------------------------------------- the store


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> sa.engine.Engine:
    return storage.open_engine(url)


def engine() -> sa.engine.Engine:
    """The process's engine for the configured database (one per URL, shared by sessions)."""
    return _engine(storage.database_url())


def profile() -> str:
    return st.session_state.get(PROFILE_KEY, DEFAULT_PROFILE)


def clean_profile(text: Any) -> str | None:
    """A profile name with its spaces tidied, or None when it is empty or too long."""
    name = " ".join(str(text or "").split())
    return name if 0 < len(name) <= MAX_PROFILE and name.isprintable() else None


def on_attempt(entry: dict[str, Any]) -> None:
    """Store one graded attempt of this session under the current profile (a ui.attempts listener)."""
    if entry.get("score") is None:
        return
    try:
        storage.record_attempt(engine(), profile(), entry["kind"], int(entry["level"]), int(entry["seed"]),
                               float(entry["score"]), entry.get("misconception"),
                               int(entry.get("hints_used") or 0), float(entry.get("seconds") or 0.0),
                               entry.get("at"))
    except (sa.exc.SQLAlchemyError, OSError, ValueError):
        st.toast(tr("progress.not_saved"), icon=":material/cloud_off:")
        return
    st.session_state[VERSION_KEY] = st.session_state.get(VERSION_KEY, 0) + 1


def subscribe() -> None:
    """Listen to Practice's attempts (once per process, however often app.py reruns)."""
    names = {(f.__module__, f.__qualname__) for f in session_attempts.LISTENERS}
    if (on_attempt.__module__, on_attempt.__qualname__) not in names:
        session_attempts.LISTENERS.append(on_attempt)


def load(name: str | None = None) -> list[storage.Attempt]:
    """All stored attempts of a profile (default: the current one), oldest first."""
    try:
        return storage.list_attempts(engine(), name or profile())
    except (sa.exc.SQLAlchemyError, OSError):
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


@dataclass(frozen=True)
class Standing:
    """How a learner stands on one topic."""

    attempts: int
    best: float
    mean: float
    recent: float  # mean of the last RECENT attempts
    level: int  # the level of the latest attempt


@dataclass(frozen=True)
class Suggestion:
    kind: str
    level: int
    reason: str  # "start", "weak", "next" or "review"
    recent: float | None = None


def _scored(attempts: Iterable[Any]) -> list[Any]:
    return [a for a in attempts if a.score is not None]


def standings(attempts: Iterable[Any]) -> dict[str, Standing]:
    """{kind: Standing} for every topic with at least one graded attempt."""
    by_kind: dict[str, list[Any]] = defaultdict(list)
    for a in _scored(attempts):
        by_kind[a.kind].append(a)
    result = {}
    for kind, rows in by_kind.items():
        scores = [float(a.score) for a in rows]
        recent = scores[-RECENT:]
        result[kind] = Standing(len(rows), max(scores), sum(scores) / len(scores), sum(recent) / len(recent),
                                int(rows[-1].level))
    return result


def top_mistakes(attempts: Iterable[Any], limit: int = 5) -> list[tuple[str, int]]:
    """The misconceptions named most often, most common first (ties: the most recent first)."""
    found = [a.misconception for a in attempts if a.misconception]
    counts = Counter(found)
    last_seen = {mid: i for i, mid in enumerate(found)}
    return sorted(counts.items(), key=lambda item: (-item[1], -last_seen[item[0]]))[:limit]


def suggest(table: dict[str, Standing], kinds: Sequence[str]) -> Suggestion:
    """What to practise next: the weakest topic tried, else the first topic not tried, else a review."""
    table = {k: s for k, s in table.items() if k in kinds}
    if not table:
        return Suggestion(kinds[0], 1, "start")
    weakest = min(table, key=lambda k: (table[k].recent, -table[k].attempts, kinds.index(k)))
    if table[weakest].recent < MASTERED:
        return Suggestion(weakest, table[weakest].level, "weak", table[weakest].recent)
    untried = [k for k in kinds if k not in table]
    if untried:
        return Suggestion(untried[0], 1, "next")
    return Suggestion(weakest, table[weakest].level, "review", table[weakest].recent)


def suggestion_text(s: Suggestion) -> str:
    recent = "" if s.recent is None else f"{s.recent:.0%}"
    return tr(f"suggest.{s.reason}", topic=tr(f"kind.{s.kind}.title"), level=s.level, recent=recent,
              last=RECENT)


def accuracy_frame(attempts: Iterable[Any], label: Any = str) -> pd.DataFrame:
    """One row per graded attempt: when, topic (labelled), level, score and the topic's running
    accuracy (mean of its last RECENT scores up to then)."""
    rows = []
    history: dict[str, list[float]] = defaultdict(list)
    for a in _scored(attempts):
        history[a.kind].append(float(a.score))
        recent = history[a.kind][-RECENT:]
        rows.append({"at": a.at, "kind": a.kind, "topic": label(a.kind), "level": int(a.level),
                     "score": float(a.score), "accuracy": sum(recent) / len(recent)})
    return pd.DataFrame(rows, columns=["at", "kind", "topic", "level", "score", "accuracy"])


def summary() -> dict[str, Standing]:
    """The current profile's standings, kept in the session until the next stored attempt."""
    state = st.session_state
    stamp = (profile(), state.get(VERSION_KEY, 0), storage.database_url())
    cached = state.get(SUMMARY_KEY)
    if cached is None or cached[0] != stamp:
        cached = (stamp, standings(load()))
        state[SUMMARY_KEY] = cached
    return cached[1]


@dataclass(frozen=True)
class Totals:
    attempts: int
    mean: float
    seconds: float


def totals(attempts: Sequence[Any]) -> Totals:
    scored = _scored(attempts)
    mean = sum(float(a.score) for a in scored) / len(scored) if scored else 0.0
    return Totals(len(scored), mean, sum(float(a.seconds or 0.0) for a in scored))


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
    order = {kind: i for i, kind in enumerate(exercises.KINDS)}
    rows = [{tr("progress.col.topic"): topic_label(kind), tr("progress.col.attempts"): s.attempts,
             tr("progress.col.best"): f"{s.best:.0%}", tr("progress.col.mean"): f"{s.mean:.0%}",
             tr("progress.col.recent"): f"{s.recent:.0%}", tr("progress.col.level"): s.level}
            for kind, s in sorted(table.items(), key=lambda item: order.get(item[0], len(order)))]
    return pd.DataFrame(rows)
