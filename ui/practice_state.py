"""Which problem the Practice page shows: from the URL on arrival, from the learner's choices after.

The canonical choice lives in plain session keys (``practice.kind``, ``.level``, ``.seed``); widgets
have their own keys and copy into them through callbacks, so leaving the page loses nothing.
"""

from __future__ import annotations

import json
import secrets
import time

import streamlit as st

import exercises
from exercises.i18n import Msg, msg

from . import answer_grid
from .i18n import lang_key, tr

DEFAULT_KIND = "softmax"
KIND, LEVEL, SEED = "practice.kind", "practice.level", "practice.seed"
KIND_WIDGET = "practice.kind_widget"  # + the language: see kind_widget_key()
NOTICES, FEEDBACK, ATTEMPTS, STARTED = "practice.notices", "practice.feedback", "practice.attempts", "practice.started"
PASTE_UNREAD = "practice.paste_unread"  # the exercise id whose Check found a paste it could not read
ADDRESS = "practice.address"  # the (kind, level, seed) this page last wrote into the address
ANSWERS_FOR = "practice.answers_for"  # the exercise id whose answer the grid's boxes hold


def new_seed() -> int:
    return secrets.randbelow(100_000)


def from_url(params: dict[str, str]) -> tuple[str, int, int, list[Msg]]:
    """(kind, level, seed) asked for by the URL, with a notice for each value that had to be replaced."""
    notices: list[Msg] = []
    kind = params.get("kind", DEFAULT_KIND)
    if kind not in exercises.KINDS:
        notices.append(msg("url.unknown_kind", kind=kind[:40], fallback=DEFAULT_KIND))
        kind = DEFAULT_KIND
    levels = exercises.KINDS[kind].LEVELS
    level_text = params.get("level", str(levels[0]))
    try:
        level = int(level_text)
        if level not in levels:
            raise ValueError
    except ValueError:
        notices.append(msg("url.bad_level", level=level_text[:20], levels=", ".join(map(str, levels)),
                           fallback=levels[0]))
        level = levels[0]
    seed_text = params.get("seed")
    seed = new_seed()
    if seed_text is not None:
        try:
            seed = int(seed_text)
            exercises.validate(kind, seed, level)
        except ValueError:
            notices.append(msg("url.bad_seed", seed=seed_text[:30]))
            seed = new_seed()
    return kind, level, seed, notices


def _addressed(params) -> tuple[str | None, ...] | None:
    """(kind, level, seed) as the address names them, or None when it names no topic (the navigation's
    own link to Practice)."""
    if "kind" not in params:
        return None
    return params.get("kind"), params.get("level"), params.get("seed")


def ensure() -> tuple[str, int, int]:
    """The current (kind, level, seed): read from the address on arrival, and whenever the address names
    another problem than the one this page last wrote into it (a link into Practice, the browser's Back);
    otherwise the learner's choices, which the address catches up with (sync_url)."""
    state = st.session_state
    asked = _addressed(st.query_params)
    if KIND not in state or (asked is not None and asked != state.get(ADDRESS)):
        kind, level, seed, notices = from_url(dict(st.query_params))
        choose(kind, level, seed)
        state[NOTICES] = notices
    if ATTEMPTS not in state:
        state[ATTEMPTS] = []
    return state[KIND], state[LEVEL], state[SEED]


def choose(kind: str, level: int, seed: int) -> None:
    state = st.session_state
    state[KIND], state[LEVEL], state[SEED] = kind, level, seed
    state[FEEDBACK] = None
    state[STARTED] = time.time()


def feedback_for(ex: exercises.Exercise) -> tuple[exercises.Feedback | None, dict[str, object] | None]:
    """(the last Check's feedback, the answer it grades) when it was for this exercise, else (None, None).
    FEEDBACK holds (exercise id, feedback, answer): the marks on screen come from that one grading."""
    stored = st.session_state.get(FEEDBACK)
    if not stored or stored[0] != ex.id:
        return None, None
    return stored[1], (stored[2] if len(stored) > 2 else None)  # a session from before the answer was kept


def same_check(stored: tuple | None, ex: exercises.Exercise, answer: object) -> bool:
    """The answer about to be graded is the very answer the last Check graded for this exercise: checking it
    again shows the same marks and is no new attempt (a spaced review needs a changed answer or a new
    problem)."""
    if not stored or stored[0] != ex.id or len(stored) < 3:
        return False
    return json.dumps(stored[2], sort_keys=True, default=str) == json.dumps(answer, sort_keys=True, default=str)


def answer_prefix(ex: exercises.Exercise) -> str:
    """The key prefix of the answer grid: one per kind and level, not per problem, so New problem keeps the
    boxes on screen and the browser redraws only their text (mounting them again is most of its work)."""
    return f"ans-{ex.kind}-L{ex.level}"


def answer_boxes(ex: exercises.Exercise) -> str:
    """answer_prefix(ex), with its boxes emptied when they hold an answer to another problem."""
    prefix, state = answer_prefix(ex), st.session_state
    if state.get(ANSWERS_FOR) != ex.id:
        answer_grid.clear(prefix)
        state[ANSWERS_FOR] = ex.id
    return prefix


def sync_url(kind: str, level: int, seed: int) -> None:
    """Keep ?kind=…&level=…&seed=… equal to the problem on screen (other parameters stay)."""
    wanted = {"kind": kind, "level": str(level), "seed": str(seed)}
    if any(st.query_params.get(k) != v for k, v in wanted.items()):
        st.query_params.update(wanted)
    st.session_state[ADDRESS] = (kind, str(level), str(seed))


# ---------------------------------------------------------------- callbacks


def on_kind_change(widget_key: str) -> None:
    kind = st.session_state[widget_key]
    levels = exercises.KINDS[kind].LEVELS
    level = st.session_state[LEVEL] if st.session_state[LEVEL] in levels else levels[0]
    choose(kind, level, new_seed())


def on_level_change(widget_key: str) -> None:
    choose(st.session_state[KIND], int(st.session_state[widget_key]), new_seed())


def on_new_problem() -> None:
    choose(st.session_state[KIND], st.session_state[LEVEL], new_seed())


def kind_widget_key() -> str:
    """The topic box's key: its options are translated titles, so one widget per language, drawn
    from the canonical ``practice.kind``."""
    return lang_key(KIND_WIDGET)


def kind_label(kind: str) -> str:
    return tr(f"kind.{kind}.title")
