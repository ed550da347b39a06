"""The one escaping rule: a value that came from a user, a URL or the database is shown as text.

Each target has its own function, named after the element that shows the value:

    markdown(text)     st.markdown / st.title / st.error / st.caption …: Markdown, KaTeX ($…$),
                       Streamlit's directives (:red[…], :material/…:), HTML and links all inert
    markdown_file(text) a line of a Markdown file (a .md worksheet): emphasis, links, images, HTML,
                       headings, tables and $…$ maths inert; plain punctuation (-, ., :, %) kept
    latex_text(text)   inside \\text{…} of a LaTeX formula (st.latex, a .tex worksheet)
    html(text)         HTML text or an attribute value
    csv(text)          a CSV cell a spreadsheet opens: no formula (=, +, -, @ first, also behind
                       invisible characters such as a zero-width space, ALM or BOM)
    xml(text)          XML text (a Moodle export): characters XML 1.0 forbids (U+FFFF, U+0000…) removed
    typst(text)        a Typst string literal: text, never markup or code

A message that carries such a value marks it ``untrusted(value)``; ``escape_params`` (used by
ui.i18n when it renders a message) escapes exactly the marked parameters for Markdown, so catalog
texts keep their own Markdown while the value they quote shows literally. Control characters are
dropped everywhere; Markdown and LaTeX get the value on one line.
"""

from __future__ import annotations

import html as _html
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from . import Msg

__all__ = ["WORD_JOINER", "XML_INVALID", "Untrusted", "csv", "distrust", "escape_params", "html", "latex_text",
           "markdown", "markdown_file", "typst", "untrusted", "xml", "xml_chars"]

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # control characters other than tab and newline
_LINE_BREAKS = re.compile(r"[\r\n\t\u2028\u2029\x85\x0b\x0c]+")
_MD_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character (CommonMark escapes)
_TEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
        "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}"}
WORD_JOINER = "\u2060"  # invisible, zero width: breaks what GFM would turn into a link by itself
_AUTOLINK = re.compile(r"(?i)www|[:@]")  # https://…, www.…, a@b.c: GFM links them even when escaped
_CSV_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n", "|")
# what a spreadsheet skips or shows as nothing before a cell's first visible character: a formula behind
# them still runs (the format characters ZWSP, ALM, LRM/RLM, BOM, word joiner …; spaces; combining
# marks; unassigned code points; the Hangul fillers)
_INVISIBLE_CATEGORIES = {"Cf", "Zs", "Zl", "Zp", "Mn", "Me", "Cn", "Co", "Cs"}
_INVISIBLE_LETTERS = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"}
# XML 1.0 allows tab, newline, CR and U+0020–U+D7FF, U+E000–U+FFFD, U+10000–U+10FFFF: nothing else,
# not even as &#…; (one U+FFFF in a name made a Moodle export unreadable)
XML_INVALID = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class Untrusted(str):
    """Text from a user, a URL or the database, carried inside a Msg: escaped wherever it is shown."""

    __slots__ = ()


def untrusted(value: Any) -> Untrusted:
    return value if isinstance(value, Untrusted) else Untrusted("" if value is None else str(value))


def _one_line(text: Any) -> str:
    return _LINE_BREAKS.sub(" ", CONTROL.sub("", "" if text is None else str(text)))


def markdown(text: Any) -> str:
    """`text` for any Streamlit element that renders Markdown: every ASCII punctuation character
    backslash-escaped (no link, image, emphasis, HTML, $…$ maths or :directive[…]), on one line.

    GFM also links a bare https://…, www.… or a@b.c, whose escapes it reads through: an invisible
    word joiner before each ':' and '@' and after 'www' keeps them text (the reader sees no change)."""
    text = _AUTOLINK.sub(lambda m: m.group() + WORD_JOINER if m.group().lower() == "www" else WORD_JOINER + m.group(),
                         _one_line(text))
    return _MD_PUNCTUATION.sub(r"\\\1", text)


_MD_FILE_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|$~])")  # what starts markup in a Markdown file


def markdown_file(text: Any) -> str:
    """`text` on one line of a Markdown file: every character that starts markup backslash-escaped."""
    return _MD_FILE_SPECIAL.sub(r"\\\1", _one_line(text))


def latex_text(text: Any) -> str:
    """`text` for the inside of \\text{…} (KaTeX or LaTeX): its specials written as characters."""
    return "".join(_TEX.get(c, c) for c in _one_line(text))


def html(text: Any) -> str:
    """`text` for HTML text or a quoted attribute value."""
    return _html.escape(CONTROL.sub("", "" if text is None else str(text)), quote=True)


def _visible_start(text: str) -> str:
    """`text` from its first visible character (or a tab, CR or newline, which start formulas too)."""
    for i, c in enumerate(text):
        if c in "\t\r\n" or (unicodedata.category(c) not in _INVISIBLE_CATEGORIES and c not in _INVISIBLE_LETTERS
                                and not CONTROL.match(c)):
            return text[i:]
    return ""


def csv(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run as a formula ('=1+1 shows as =1+1); numbers unchanged.

    The cell is judged from its first visible character, NFKC-normalised: "=" behind a zero-width
    space, an ALM or a BOM, and a full-width ＝, get the apostrophe too."""
    if not isinstance(value, str):
        return value
    text = CONTROL.sub("", value)
    start = unicodedata.normalize("NFKC", _visible_start(value)[:8])
    return "'" + text if start.startswith(_CSV_FORMULA) or text.startswith(_CSV_FORMULA) else text


def xml_chars(text: Any) -> str:
    """`text` without the characters XML 1.0 cannot hold (U+FFFF, U+FFFE, lone surrogates, controls)."""
    return XML_INVALID.sub("", "" if text is None else str(text))


def xml(text: Any) -> str:
    """`text` for XML text or a quoted attribute value: forbidden characters removed, then & < > " escaped."""
    return _html.escape(xml_chars(text), quote=True)


def typst(text: Any) -> str:
    """A Typst string literal holding `text`: it reaches the document as text, never as markup or code."""
    text = CONTROL.sub(" ", "" if text is None else str(text))
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "") + '"'


def distrust(message: Msg) -> Msg:
    """The message with every plain-text parameter (in it and in the messages it holds) marked
    Untrusted: for messages whose text parameters are all data (a URL's value, a typed name)."""
    return Msg(message.key, {name: distrust(v) if isinstance(v, Msg) else untrusted(v) if isinstance(v, str) else v
                             for name, v in message.params.items()})


def escape_params(message: Msg, escape: Callable[[Any], str] = markdown) -> Msg:
    """The message with every Untrusted parameter (in it and in the messages it holds) escaped."""
    return Msg(message.key, _escaped(message.params, escape))


def _escaped(params: Mapping[str, Any], escape: Callable[[Any], str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in params.items():
        if isinstance(value, Msg):
            out[name] = escape_params(value, escape)
        elif isinstance(value, Untrusted):
            out[name] = escape(value)
        else:
            out[name] = value
    return out
