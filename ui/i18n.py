"""The current language and the one way pages turn catalog keys into text.

The language lives in session state under ``lang``. On a session's first run it comes from the URL
(``?lang=zh``), else from the browser (its locale, then its Accept-Language header), else English;
after that the sidebar switch changes it and the URL follows, so a reload or a shared link keeps it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import streamlit as st

from exercises.i18n import DEFAULT_LANG, Msg, languages, t

LANG_KEY = "lang"
URL_PARAM = "lang"
WIDGET_KEY = "lang.widget"
NAMES = {"en": "English", "zh": "简体中文"}  # each language named in itself


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


# widgets that send their choice back as its label (selectbox, radio, multiselect, pills, segmented
# control, select slider): labels are translated, so after a switch the old label matches no option
_OPTION_SERDES = {"SelectboxSerde", "RadioSerde", "MultiSelectSerde", "SelectSliderSerde",
                  "_SingleSelectButtonGroupSerde", "_MultiSelectButtonGroupSerde"}


def option_widget_keys() -> list[str]:
    """The keys of this session's option widgets (found through Streamlit's session internals; an
    empty list if those ever change shape, which only brings back stale labels after a switch)."""
    try:
        from streamlit.runtime.state.session_state_proxy import get_session_state
        state = get_session_state()._state
        keys = []
        for key in list(st.session_state.keys()):
            meta = state._new_widget_state.widget_metadata.get(state._get_widget_id(key))
            serde = getattr(getattr(meta, "deserializer", None), "__self__", None)
            if type(serde).__name__ in _OPTION_SERDES:
                keys.append(key)
        return keys
    except (AttributeError, ImportError, KeyError, TypeError):
        return []


def _relabel_option_widgets() -> None:
    """Write each option widget's value back to itself: the next run then sends the choice to the
    browser under its label in the new language (text boxes are left alone: their drafts stay)."""
    for key in option_widget_keys():
        if key != WIDGET_KEY:
            st.session_state[key] = st.session_state[key]


def _on_switch() -> None:
    st.session_state[LANG_KEY] = st.session_state[WIDGET_KEY]
    st.query_params[URL_PARAM] = st.session_state[LANG_KEY]
    _relabel_option_widgets()


def language_switch() -> str:
    """The sidebar switch English / 简体中文; returns the language in use."""
    st.session_state[WIDGET_KEY] = lang()  # the widget follows the canonical key, whoever set it
    st.sidebar.radio(tr("lang.label"), available(), format_func=lambda code: NAMES.get(code, code),
                     key=WIDGET_KEY, horizontal=True, on_change=_on_switch)
    return lang()
