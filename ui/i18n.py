"""The current language and the one way pages turn catalog keys into text."""

from __future__ import annotations

from typing import Any

import streamlit as st

from exercises.i18n import DEFAULT_LANG, Msg, languages, t

LANG_KEY = "lang"


def lang() -> str:
    return st.session_state.get(LANG_KEY, DEFAULT_LANG)


def tr(key: str, **params: Any) -> str:
    """The message `key` in the learner's language."""
    return t(key, lang(), **params)


def render(message: Msg | str | None) -> str:
    """A Msg (or plain text) in the learner's language."""
    if message is None:
        return ""
    return message.render(lang()) if isinstance(message, Msg) else str(message)


def available() -> list[str]:
    return languages()
