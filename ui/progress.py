"""A learner's progress on a page: this browser's private profile (its cookie, the data panel), the
standings and review schedule kept in the session, Up next, the mastery table and the chart.

Every graded attempt on Practice reaches ``on_attempt`` (a listener of ui.attempts) and is stored
through services.progress, so it survives a restart. The analytics themselves (standings, mistakes,
the schedule, the chart's data) live in services.progress, services.review and services.profiles; this
module only draws and translates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

import exercises
from exercises.i18n import DEFAULT_LANG, catalog
from services import db, profiles, progress, review, throttle
from services.progress import (  # noqa: F401  (names Home and the pages read from here)
    MASTERED,
    RECENT,
    Standing,
    Totals,
    accuracy_frame,
    standings,
    top_mistakes,
    totals,
)

from . import attempts as session_attempts
from . import guard, pipeline_map
from .i18n import tr

PROFILE_KEY = "progress.profile"  # the profile id this session works under (never shown)
SECRET_KEY = "progress.secret"  # the secret this browser must keep in its cookie (None: signed in)
BROWSER_KEY = "progress.browser"  # this browser's own id, kept in its other cookie
HANDED_KEY = "progress.handed"  # the secret already handed to the browser for its next page load
CONFIRMED_KEY = "progress.confirmed"  # False: the cookie's profile was issued to another browser: ask first
PENDING_KEY = "progress.pending"  # attempts waiting for that answer (filed on "it is mine")
NOTICE_KEY = "progress.notice"  # a message about the profile for this session ("unknown_id", …)
SAVED_KEY = "progress.saved"  # False when the database could not open a profile: nothing is kept
CODE_KEY = "progress.recovery_code"  # a recovery code just made: shown once
VERSION_KEY = "progress.version"  # bumped on every stored attempt: cached summaries are stale after it
SUMMARY_KEY = "progress.summary"


def _signed_in() -> dict[str, Any] | None:
    """The signed-in user (st.login with OIDC) as a dict, or None when no one is (or no login is set up)."""
    try:
        info = st.user.to_dict()
    except Exception:  # noqa: BLE001  (no [auth] section, or an older runtime: nobody is signed in)
        return None
    return info if info.get("is_logged_in") and info.get("sub") else None


def server_cookie(name: str) -> str | None:
    """A cookie the server set (ui/profile_cookie.py): its `__Host-` name (only a TLS response can set
    that one), else, unless the page came over TLS through the proxy, its bare name (over TLS a sibling
    site could plant that one)."""
    cookies = st.context.cookies
    try:
        tls = throttle.over_tls(st.context.ip_address, dict(st.context.headers or {}))
    except Exception:  # noqa: BLE001  (no request context: a bare script or a test run)
        tls = False
    return cookies.get(profiles.cookie_name(name, True)) or (None if tls else cookies.get(name))


def browser_secret() -> str | None:
    """The secret this browser sent in its cookie when it connected (None: a browser new to this app)."""
    return server_cookie(profiles.COOKIE)


def browser_id() -> str | None:
    """This browser's own id from its cookie."""
    return server_cookie(profiles.BROWSER_COOKIE)


def _login_configured() -> bool:
    """Whether the deployment set up st.login (an [auth] section): st.user then says whether anyone is in."""
    try:
        return "is_logged_in" in st.user.to_dict()
    except Exception:  # noqa: BLE001
        return False


def _adopt(opened: profiles.Opened) -> None:
    state = st.session_state
    state[PROFILE_KEY], state[SECRET_KEY] = opened.profile, opened.secret
    state[BROWSER_KEY], state[CONFIRMED_KEY] = opened.browser, opened.confirmed
    state[VERSION_KEY] = state.get(VERSION_KEY, 0) + 1
    if opened.notice:
        state[NOTICE_KEY] = opened.notice


def open_profile() -> str:
    """This session's profile, opened once per session: the signed-in user's when a login is set up and
    used, else this browser's own (its cookie's), else a fresh one whose secret the browser then keeps."""
    state = st.session_state
    user = _signed_in()
    if user is not None:
        wanted = profiles.login_profile_id(user.get("iss"), user["sub"])
        if state.get(PROFILE_KEY) != wanted:
            try:
                _adopt(profiles.open_login(user.get("iss"), user["sub"]))
            except (db.Unavailable, ValueError):
                state[PROFILE_KEY], state[SAVED_KEY] = wanted, False
        return state[PROFILE_KEY]
    signed_out = PROFILE_KEY in state and bool(state.get(SECRET_KEY)) and not _still_open()
    if signed_out:  # by a new recovery code or "sign out other browsers" elsewhere: a fresh profile
        for key in (PROFILE_KEY, SECRET_KEY, PENDING_KEY):
            state.pop(key, None)
    if PROFILE_KEY not in state:
        try:
            _adopt(profiles.open_browser(browser_secret(), state.get(BROWSER_KEY) or browser_id()))
            state[SAVED_KEY] = True
        except db.Unavailable:
            state[PROFILE_KEY], state[SECRET_KEY], state[SAVED_KEY] = profiles.unsaved_profile_id(), None, False
        if signed_out:
            state[NOTICE_KEY] = "signed_out"
    return state[PROFILE_KEY]


def _still_open() -> bool:
    try:
        return profiles.still_open(st.session_state[PROFILE_KEY], st.session_state[SECRET_KEY])
    except db.Unavailable:
        return True  # nothing can be filed anyway; asked again at the next run


def profile() -> str:
    return st.session_state.get(PROFILE_KEY) or open_profile()


def hand_to_browser() -> None:
    """When this session works under a secret the browser's cookie does not hold (a recovery code opened
    another profile, a fresh one replaced a forged or signed-out cookie), the server gives the browser
    that secret at its next page load (ui/profile_cookie.py): no script on the page sets or reads it."""
    state = st.session_state
    secret, browser = state.get(SECRET_KEY), state.get(BROWSER_KEY)
    if not secret or browser_secret() == secret or state.get(HANDED_KEY) == secret:
        return
    if not browser or browser_id() != browser:  # a browser that keeps no cookie cannot take it
        return
    try:
        profiles.hand_off(state[PROFILE_KEY], browser)
    except db.Unavailable:
        return
    state[HANDED_KEY] = secret


def notice() -> None:
    """Tell the learner, once, that the profile this browser pointed to could not be opened."""
    found = st.session_state.pop(NOTICE_KEY, None)
    if found:
        st.warning(tr(f"profile.notice.{found}"), icon=":material/person_alert:")
    if st.session_state.get(SAVED_KEY) is False:
        st.warning(tr("profile.not_kept"), icon=":material/cloud_off:")


def on_attempt(entry: dict[str, Any]) -> None:
    """Store one graded attempt of this session under the current profile (a ui.attempts listener); held
    back while the profile came from a cookie this browser did not create and its user has not said it is
    theirs (confirm_ui)."""
    state = st.session_state
    try:
        stored = progress.record_attempt(profile(), entry, secret=state.get(SECRET_KEY), browser=state.get(BROWSER_KEY))
    except profiles.NotConfirmed:
        state.setdefault(PENDING_KEY, []).append(entry)
        state[CONFIRMED_KEY] = False
        st.toast(tr("profile.held"), icon=":material/person_alert:")
        return
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


# ---------------------------------------------------------------- the learner's own data


def _make_code() -> None:
    try:  # every other browser of the profile is signed out
        st.session_state[CODE_KEY] = profiles.new_recovery_code(profile(), keep=st.session_state.get(SECRET_KEY))
    except db.Unavailable:
        st.session_state[NOTICE_KEY] = "unavailable"


def _sign_out_others() -> None:
    secret = st.session_state.get(SECRET_KEY)
    if not secret:
        return
    try:
        profiles.sign_out_others(profile(), secret)
    except db.Unavailable:
        st.session_state[NOTICE_KEY] = "unavailable"
        return
    st.session_state[NOTICE_KEY] = "others_signed_out"


def _confirm(mine: bool) -> None:
    """The answer to "is this profile yours?": file the held attempts there, or start a profile of its own."""
    state = st.session_state
    try:
        if mine:
            profiles.confirm(state.get(SECRET_KEY), state.get(BROWSER_KEY))
            state[CONFIRMED_KEY] = True
        else:
            _adopt(profiles.open_browser(None, state.get(BROWSER_KEY)))
    except db.Unavailable:
        state[NOTICE_KEY] = "unavailable"
        return
    for entry in state.pop(PENDING_KEY, []):
        on_attempt(entry)


def confirm_ui(container: Any = st.sidebar) -> None:
    """Ask, once the cookie's profile turns out to be another browser's, whether it is this user's own."""
    if st.session_state.get(CONFIRMED_KEY, True):
        return
    with container.container(border=True):
        st.warning(tr("profile.confirm_text"), icon=":material/person_alert:")
        st.button(tr("profile.confirm_yes"), key="progress.confirm_yes", on_click=_confirm, args=(True,))
        st.button(tr("profile.confirm_no"), key="progress.confirm_no", on_click=_confirm, args=(False,))


def _open_code(widget_key: str) -> None:
    if guard.wait("recovery") > 0:  # throttled per browser address and for everyone
        st.session_state[NOTICE_KEY] = "throttled"
        return
    try:
        opened = profiles.open_with_code(st.session_state.get(widget_key), st.session_state.get(BROWSER_KEY))
    except db.Unavailable:
        st.session_state[NOTICE_KEY] = "unavailable"
        return
    st.session_state[widget_key] = ""
    if opened is None:
        guard.failed("recovery")
        st.session_state[NOTICE_KEY] = "unknown_code"
        return
    guard.succeeded("recovery")
    _adopt(opened)
    st.session_state[NOTICE_KEY] = "opened"


def _delete(confirm_key: str) -> None:
    if not st.session_state.get(confirm_key):
        return
    try:
        profiles.delete(profile())
        user = _signed_in()
        _adopt(profiles.open_login(user.get("iss"), user["sub"]) if user
               else profiles.open_browser(None, st.session_state.get(BROWSER_KEY)))
    except db.Unavailable:
        st.session_state[NOTICE_KEY] = "unavailable"
        return
    st.session_state[confirm_key] = False
    st.session_state.pop(CODE_KEY, None)
    st.session_state[NOTICE_KEY] = "deleted"


def data_panel(key: str = "progress.data") -> None:
    """Where the learner's data lives, a recovery code (shown once), opening a profile with a code,
    and downloading or deleting everything."""
    with st.expander(tr("profile.data_title"), icon=":material/shield_person:"):
        signed_in = _signed_in() is not None
        st.markdown(tr("profile.where_login" if signed_in else "profile.where"))
        if signed_in and st.button(tr("profile.logout"), key=f"{key}.logout", icon=":material/logout:"):
            st.logout()
        elif not signed_in and _login_configured() and st.button(tr("profile.login"), key=f"{key}.login",
                                                                 icon=":material/login:"):
            st.login()
        if not signed_in:
            st.markdown(f"**{tr('profile.code_title')}**")
            code = st.session_state.pop(CODE_KEY, None)
            if code:
                st.code(code, language=None)
                st.caption(tr("profile.code_once"))
            else:
                st.button(tr("profile.code_make"), key=f"{key}.make", on_click=_make_code, icon=":material/key:",
                          help=tr("profile.code_help"))
            st.text_input(tr("profile.code_enter"), key=f"{key}.code", max_chars=40, type="password",
                          help=tr("profile.code_enter_help"))
            st.button(tr("profile.code_open"), key=f"{key}.open", on_click=_open_code, args=(f"{key}.code",),
                      icon=":material/login:")
            st.button(tr("profile.sign_out_others"), key=f"{key}.others", on_click=_sign_out_others,
                      icon=":material/devices_off:", help=tr("profile.sign_out_others_help"))
        st.markdown(f"**{tr('profile.export_title')}**")
        try:
            exported = json.dumps(profiles.export(profile()), ensure_ascii=False, indent=1)
        except db.Unavailable:
            exported = None
        if exported is not None:
            st.download_button(tr("profile.export"), exported, file_name="attention-by-hand-progress.json",
                               mime="application/json", key=f"{key}.export", icon=":material/download:")
        st.checkbox(tr("profile.delete_confirm"), key=f"{key}.confirm")
        st.button(tr("profile.delete"), key=f"{key}.delete", on_click=_delete, args=(f"{key}.confirm",),
                  icon=":material/delete_forever:", disabled=not st.session_state.get(f"{key}.confirm"))


# ---------------------------------------------------------------- summaries


def _cached() -> tuple[Any, dict[str, Standing], dict[tuple[str, int], review.Card]]:
    state = st.session_state
    stamp = (profile(), state.get(VERSION_KEY, 0), db.url())
    cached = state.get(SUMMARY_KEY)
    if cached is None or cached[0] != stamp:
        rows = load()
        cached = (stamp, standings(rows), review.cards(rows))
        state[SUMMARY_KEY] = cached
    return cached


def summary() -> dict[str, Standing]:
    """The current profile's standings, kept in the session until the next stored attempt."""
    return _cached()[1]


def schedule() -> dict[tuple[str, int], review.Card]:
    """The current profile's review cards (replayed from its attempts), kept like summary()."""
    return _cached()[2]


def now() -> datetime:
    return datetime.now(UTC)


def up_next(kinds: Sequence[str]) -> review.Next:
    return review.next_from(schedule(), kinds, now())


def next_text(n: review.Next) -> str:
    """Why this is up next, in the learner's language."""
    return tr(f"next.{n.reason}", topic=tr(f"kind.{n.kind}.title"), level=n.level,
              recall="" if n.recall is None else f"{n.recall:.0%}", minutes=n.minutes_ago or 0)


def next_link(n: review.Next) -> None:
    pipeline_map.practice_link(n.kind, n.level, icon=":material/arrow_forward:",
                     label=tr("suggest.go", topic=tr(f"kind.{n.kind}.title"), level=n.level))


def due_text(kinds: Sequence[str]) -> str:
    count = review.due_count(schedule(), now(), kinds)
    return tr("next.due_none") if count == 0 else tr("next.due", count=count)


def mastery_table(table: dict[tuple[str, int], review.Card], at: datetime) -> pd.DataFrame:
    """One row per card (topic × level), in pipeline order: reviews, stability, predicted recall now,
    when it is due and whether it is mastered."""
    rows = []
    for topic in review.mastery(table):
        for card in topic.cards:
            state = "mastered" if card.mastered else "passed" if card.passed else "learning"
            due = tr("progress.due_now") if card.is_due(at) else card.due.strftime("%Y-%m-%d")
            rows.append({tr("progress.col.topic"): topic_label(card.kind), tr("progress.col.card_level"): card.level,
                         tr("progress.col.reviews"): card.reviews,
                         tr("progress.col.stability"): tr("progress.days", days=f"{card.stability:.1f}"),
                         tr("progress.col.recall"): f"{card.recall(at):.0%}",
                         tr("progress.col.due"): due, tr("progress.col.state"): tr(f"progress.state.{state}")})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- drawing helpers


def topic_label(kind: str) -> str:
    return tr(f"kind.{kind}.title")


def mistake_name(mistake: str) -> str:
    """A short name for a misconception (its explanation when no short name is in the catalog)."""
    key = f"progress.mistake.{mistake}"
    return tr(key) if key in catalog(DEFAULT_LANG) else tr(f"misconception.{mistake}")


SHOWN_PER_TOPIC = 20  # the chart's last attempts on each topic (the table above counts them all)
SCORE_SCHEME = {"name": "redyellowblue", "extent": [0.2, 0.8]}  # the light part: a level written on it stays readable


def attempts_chart(attempts: Sequence[Any]) -> alt.LayerChart:
    """Every attempt, topic by topic: a row per topic in pipeline order, a square per attempt along it
    (the first on the left: its number among the topic's attempts, so a session of quick checks does not
    collapse into one stroke of the time axis), coloured by its score on one scale for all topics and
    marked with its level; its date and time in the tooltip."""
    frame = accuracy_frame(attempts, topic_label)
    frame = frame[frame.groupby("kind")["number"].transform("max") - frame["number"] < SHOWN_PER_TOPIC]
    frame = frame.assign(at=pd.to_datetime(frame["at"], utc=True).dt.strftime("%Y-%m-%d %H:%M"))
    order = [topic_label(kind) for kind in exercises.KINDS if kind in set(frame["kind"])]
    base = alt.Chart(frame).encode(
        x=alt.X("number:O", title=tr("progress.axis.number"), axis=alt.Axis(labelAngle=0)),
        y=alt.Y("topic:N", title=None, sort=order, axis=alt.Axis(labelLimit=160)),
        tooltip=[alt.Tooltip("topic:N", title=tr("progress.axis.topic")),
                 alt.Tooltip("number:O", title=tr("progress.axis.number")),
                 alt.Tooltip("level:O", title=tr("progress.axis.level")),
                 alt.Tooltip("score:Q", title=tr("progress.axis.score"), format=".0%"),
                 alt.Tooltip("at:N", title=tr("progress.axis.time"))])
    squares = base.mark_rect(stroke="white", strokeWidth=2).encode(
        color=alt.Color("score:Q", title=tr("progress.axis.score"), legend=alt.Legend(format="%", orient="bottom"),
                        scale=alt.Scale(domain=[0, 1], scheme=SCORE_SCHEME)))
    levels = base.mark_text(fontSize=11).encode(text="level:O")
    square = alt.Step(26)
    return alt.layer(squares, levels).properties(width=square, height=square, description=tr("progress.chart"))


def topic_table(table: dict[str, Standing]) -> pd.DataFrame:
    """One row per topic tried, in pipeline order, with translated column names."""
    rows = [{tr("progress.col.topic"): topic_label(kind), tr("progress.col.attempts"): s.attempts,
             tr("progress.col.best"): f"{s.best:.0%}", tr("progress.col.mean"): f"{s.mean:.0%}",
             tr("progress.col.recent"): f"{s.recent:.0%}", tr("progress.col.level"): s.level}
            for kind, s in progress.in_pipeline_order(table)]
    return pd.DataFrame(rows)
