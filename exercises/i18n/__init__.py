"""One message catalog for every user-facing string.

Catalogs live in ``exercises/i18n/locales/<lang>/*.json`` (what the app and several kinds share) and in
each kind folder, ``exercises/kinds/<id>/locales/<lang>.json`` (its title, summary, prompt, hints,
its own mistakes, its formula-sheet texts). The files of one language are merged into one flat
dictionary (``"practice.check": "Check"``); no key may be defined twice. Placeholders use
``str.format`` syntax. Adding a language is adding a folder and a file per kind, not changing code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

LOCALES = Path(__file__).parent / "locales"
KINDS_DIR = Path(__file__).parent.parent / "kinds"
DEFAULT_LANG = "en"
_extra_kind_folders: list[Path] = []  # kind folders from outside exercises/kinds/ (engine.added_kinds)


def kind_folders() -> list[Path]:
    """Every kind folder whose texts the catalogs merge: exercises/kinds/<id>/ (not _shared), then extras."""
    own = sorted(p for p in KINDS_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    return own + [p for p in _extra_kind_folders if p not in own]


def add_kind_folder(folder: Path) -> None:
    """Merge the texts of a kind folder from outside exercises/kinds/ into the catalogs."""
    if Path(folder) not in _extra_kind_folders:
        _extra_kind_folders.append(Path(folder))
        catalog.cache_clear()


def remove_kind_folder(folder: Path) -> None:
    if Path(folder) in _extra_kind_folders:
        _extra_kind_folders.remove(Path(folder))
        catalog.cache_clear()


def catalog_files(lang: str) -> list[Path]:
    """The JSON files of one language: the shared ones, then each kind folder's."""
    folder = LOCALES / lang
    if not folder.is_dir():
        return []
    kinds = [f / "locales" / f"{lang}.json" for f in kind_folders()]
    return sorted(folder.glob("*.json")) + [p for p in kinds if p.is_file()]


@cache
def catalog(lang: str) -> dict[str, str]:
    """All messages of one language, merged from its JSON files (later files must not repeat keys)."""
    merged: dict[str, str] = {}
    for path in catalog_files(lang):
        entries = json.loads(path.read_text(encoding="utf-8"))
        repeated = merged.keys() & entries.keys()
        if repeated:
            where = path.name if path.parent.parent == LOCALES else f"{path.parent.parent.name}/locales/{path.name}"
            raise ValueError(f"{where} repeats keys already defined: {sorted(repeated)[:5]}")
        merged.update(entries)
    return merged


def languages() -> list[str]:
    """The languages with a catalog folder (read once: every page run asks, for its language switch)."""
    return list(_languages())


@cache
def _languages() -> tuple[str, ...]:
    return tuple(sorted(p.name for p in LOCALES.iterdir() if p.is_dir() and any(p.glob("*.json"))))


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


def part_key(name: str, kind: str | None = None) -> str:
    """The catalog key of a part's name: ``part.<kind>.<name>`` where a kind names its part its own way (rope's
    scores are of the rotated rows), else ``part.<name>``."""
    own = f"part.{kind}.{name}"
    return own if kind and own in catalog(DEFAULT_LANG) else f"part.{name}"


def plural(key: str, count: int, **params: Any) -> Msg:
    """The message `key.one` when `count` is 1, else `key.other`; both get {count} (a catalog has both keys)."""
    return Msg(f"{key}.{'one' if count == 1 else 'other'}", {"count": count, **params})
