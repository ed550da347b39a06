"""One message catalog for every user-facing string.

Catalogs live in ``exercises/locales/<lang>/*.json``; the files of one language are merged into one
flat dictionary (``"practice.check": "Check"``). Placeholders use ``str.format`` syntax. Adding a
language is adding a folder, not changing code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

LOCALES = Path(__file__).parent / "locales"
DEFAULT_LANG = "en"


@cache
def catalog(lang: str) -> dict[str, str]:
    """All messages of one language, merged from its JSON files (later files must not repeat keys)."""
    merged: dict[str, str] = {}
    folder = LOCALES / lang
    if not folder.is_dir():
        return merged
    for path in sorted(folder.glob("*.json")):
        entries = json.loads(path.read_text(encoding="utf-8"))
        repeated = merged.keys() & entries.keys()
        if repeated:
            raise ValueError(f"{path.name} repeats keys already defined: {sorted(repeated)[:5]}")
        merged.update(entries)
    return merged


def languages() -> list[str]:
    return sorted(p.name for p in LOCALES.iterdir() if p.is_dir() and any(p.glob("*.json")))


def t(key: str, lang: str = DEFAULT_LANG, **params: Any) -> str:
    """The message `key` in `lang` (falling back to English, then to the key itself)."""
    template = catalog(lang).get(key)
    if template is None:
        template = catalog(DEFAULT_LANG).get(key, key)
    rendered = {k: (v.render(lang) if isinstance(v, Msg) else v) for k, v in params.items()}
    try:
        return template.format(**rendered)
    except (KeyError, IndexError, ValueError):
        return template


@dataclass(frozen=True)
class Msg:
    """A message not yet rendered: a catalog key and its parameters (which may be Msgs)."""

    key: str
    params: dict[str, Any] = field(default_factory=dict)

    def render(self, lang: str = DEFAULT_LANG) -> str:
        return t(self.key, lang, **self.params)

    def __str__(self) -> str:
        return self.render(DEFAULT_LANG)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "params": {k: (v.to_dict() if isinstance(v, Msg) else v)
                                            for k, v in self.params.items()}}


def msg(key: str, **params: Any) -> Msg:
    return Msg(key, params)


def plural(key: str, count: int, **params: Any) -> Msg:
    """The message `key.one` when `count` is 1, else `key.other`; both get {count} (a catalog has both keys)."""
    return Msg(f"{key}.{'one' if count == 1 else 'other'}", {"count": count, **params})
