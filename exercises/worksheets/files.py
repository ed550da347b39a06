"""A worksheet as data (JSON) and as files: every format's two documents, written into a folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.model import to_jsonable
from .model import EXP_PLACES, FORMATS, NAMES, Worksheet, _option_text, problem, solution_steps
from .text import to_latex, to_markdown
from .typst import to_pdf


def to_json(ws: Worksheet, key: bool = False) -> str:
    """The problems as data; the worksheet leaves out seeds and answers, the key has both."""
    lang = ws.lang
    sheets = []
    for sheet in ws.sheets:
        problems = []
        for number, ex in enumerate(sheet.exercises, start=1):
            p = problem(ex, number, lang)
            parts = []
            for part, words in p.asks:
                d = {"name": part.name, "shape": list(part.shape), "decimals": part.decimals, "ask": words}
                if part.is_choice:
                    d["options"] = [_option_text(o, part, lang) for o in part.options]
                if key:
                    d["reference"] = to_jsonable(part.reference)
                parts.append(d)
            entry: dict[str, Any] = {"number": number, "kind": ex.kind, "level": ex.level, "title": p.title,
                                     "prompt": p.prompt, "notes": list(p.notes), "given": to_jsonable(ex.given),
                                     "parts": parts}
            if p.aids.exp_table and not key:
                entry["exp_table"] = [{"x": e.x, "exp": round(e.value, EXP_PLACES)} for e in p.aids.exp_table]
            if key:
                entry.update(seed=ex.seed, version=ex.version,
                             solution=[{"title": s.title, "latex": s.latex, "note": s.note,
                                        "value": to_jsonable(s.value)} for s in solution_steps(ex, lang)])
            problems.append(entry)
        sheets.append({"student": sheet.student, "problems": problems})
    doc: dict[str, Any] = {"document": "answer-key" if key else "worksheet", "title": ws.spec.title,
                           "code": ws.code, "lang": lang, "per_student": ws.spec.per_student, "sheets": sheets}
    if key:
        doc["assignment"] = ws.spec.to_dict()
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


# ---------------------------------------------------------------- files

_RENDER = {"pdf": to_pdf, "md": to_markdown, "tex": to_latex, "json": to_json}


def render(ws: Worksheet, fmt: str) -> dict[str, bytes]:
    """{"worksheet.<fmt>": …, "answer-key.<fmt>": …}."""
    if fmt not in _RENDER:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = {}
    for name, key in zip(NAMES, (False, True)):
        data = _RENDER[fmt](ws, key)
        out[f"{name}.{fmt}"] = data if isinstance(data, bytes) else data.encode("utf-8")
    return out


def write(ws: Worksheet, fmt: str, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in render(ws, fmt).items():
        path = folder / name
        path.write_bytes(data)
        paths.append(path)
    return paths
