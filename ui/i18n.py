"""The current language and the one way pages turn catalog keys into text.

The language lives in session state under ``lang``. On a session's first run it comes from the URL
(``?lang=zh``), else from the browser (its locale, then its Accept-Language header), else English;
after that the sidebar switch changes it and the URL follows, so a reload or a shared link keeps it.
A widget whose options are translated gets a key per language (``lang_key``), so a switch never
leaves the browser holding a label of the other language; only public Streamlit API is used.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import streamlit as st

from exercises.i18n import DEFAULT_LANG, Msg, escape, languages

LANG_KEY = "lang"
URL_PARAM = "lang"
WIDGET_KEY = "lang.widget"
NAMES = {"en": "English", "zh": "简体中文"}  # each language named in itself


def lang() -> str:
    return st.session_state.get(LANG_KEY, DEFAULT_LANG)


def tr(key: str, **params: Any) -> str:
    """The message `key` in the learner's language, for an element that renders Markdown: a
    parameter marked escape.untrusted (text from a user, a URL, the database) shows literally."""
    return escape.escape_params(Msg(key, params)).render(lang())


def render(message: Msg | str | None, untrusted: bool = False) -> str:
    """A Msg (or plain text) in the learner's language, its untrusted parameters escaped for Markdown
    (untrusted=True: every text parameter, for a message whose texts are all data, such as a URL's)."""
    if message is None:
        return ""
    if isinstance(message, Msg):
        return escape.escape_params(escape.distrust(message) if untrusted else message).render(lang())
    return escape.markdown(message) if isinstance(message, escape.Untrusted) else str(message)


def user_text(text: Any) -> str:
    """Text from a user, a URL or the database, for an element that renders Markdown (st.title …)."""
    return escape.markdown(text)


def available() -> list[str]:
    return languages()


def pick(tags: Iterable[str | None], supported: Iterable[str]) -> str | None:
    """The first supported language among browser language tags ("zh-CN" → "zh"), or None."""
    supported = set(supported)
    for tag in tags:
        primary = (tag or "").strip().replace("_", "-").split("-")[0].lower()
        if primary in supported:
            return primary
    return None


def accept_language(header: str | None) -> list[str]:
    """The tags of an Accept-Language header, most preferred first ("zh-CN,zh;q=0.9,en;q=0.8")."""
    ranked = []
    for position, item in enumerate((header or "").split(",")):
        tag, _, params = item.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        if tag and tag != "*" and quality > 0:
            ranked.append((-quality, position, tag))
    return [tag for _, _, tag in sorted(ranked)]


def browser_lang() -> str | None:
    """The browser's language when the app has a catalog for it (the locale first, then the header)."""
    tags: list[str | None] = [st.context.locale]
    tags += accept_language(st.context.headers.get("Accept-Language"))
    return pick(tags, available())


def resolve() -> str:
    """Settle this run's language (call once at the top of app.py) and keep ?lang= in the URL."""
    state = st.session_state
    if LANG_KEY not in state or state[LANG_KEY] not in available():
        asked = st.query_params.get(URL_PARAM)
        state[LANG_KEY] = asked if asked in available() else (browser_lang() or DEFAULT_LANG)
    if st.query_params.get(URL_PARAM) != state[LANG_KEY]:
        st.query_params[URL_PARAM] = state[LANG_KEY]
    return state[LANG_KEY]


# An option widget (selectbox, radio, …) sends its choice back as its label. Its labels are
# translated, so after a switch the browser would send a label of the other language that matches no
# option. Such a widget gets one key per language (lang_key): after a switch it is a new widget, drawn
# from the canonical choice kept under a language-independent key, never from a stale label.
CARRIED = "lang.carried"  # {base: None}: language-keyed widgets whose own value a switch carries over


def lang_key(base: str, carry: bool = False) -> str:
    """The key of a widget whose label or options are translated: `base` in the current language.

    With carry=True the widget's value is itself the canonical choice (no callback copies it, as in
    a form): a switch then carries it over to the new language's widget."""
    if carry:
        st.session_state.setdefault(CARRIED, {})[base] = None
    return f"{base}.{lang()}"


def _carry_over(old: str, new: str) -> None:
    state = st.session_state
    for base in state.get(CARRIED, {}):
        if f"{base}.{old}" in state:
            state[f"{base}.{new}"] = state[f"{base}.{old}"]


def _on_switch() -> None:
    old, new = lang(), st.session_state[WIDGET_KEY]
    st.session_state[LANG_KEY] = new
    st.query_params[URL_PARAM] = new
    _carry_over(old, new)


def language_switch() -> str:
    """The sidebar switch English / 简体中文; returns the language in use. Its options are named each
    in its own language, the same in both, so one key serves; the canonical choice is ``lang``."""
    st.session_state[WIDGET_KEY] = lang()  # the widget follows the canonical key, whoever set it
    st.sidebar.radio(tr("lang.label"), available(), format_func=lambda code: NAMES.get(code, code),
                     key=WIDGET_KEY, horizontal=True, on_change=_on_switch)
    return lang()
