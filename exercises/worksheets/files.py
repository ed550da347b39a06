"""A worksheet as data (JSON) and as files: every format's two documents, written into a folder."""

from __future__ import annotations

import json
import threading
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


# ---------------------------------------------------------------- a class's PDFs, bounded in memory

MAX_EXERCISES = 4000  # students × exercises of one print run (200 × 20): past it, a clear message


def sheet_file(number: int, student: str | None, name: str) -> str:
    """A file name in the ZIP: worksheet-03-ada-lovelace.pdf (letters and digits of the name only)."""
    if student is None:
        return f"{name}.pdf"
    slug = "-".join("".join(c if c.isalnum() else " " for c in student.casefold()).split())[:40]
    return f"{name}-{number:03d}{'-' + slug if slug else ''}.pdf"


RECYCLE_AFTER = 20  # PDFs one compiler process makes before a fresh one takes over …
RECYCLE_SOURCE = 1_500_000  # … or once it has compiled this many bytes of Typst source


class Compiler:
    """Typst in a child process that only imports typst, replaced by a fresh one every RECYCLE_AFTER
    documents or RECYCLE_SOURCE bytes of source: Typst's caches grow with every document it compiles
    (about 3.5 MB for a small sheet, far more for a long key) and are never given back."""

    def __init__(self) -> None:
        self._pool: Any = None
        self._count = 0
        self._bytes = 0

    def submit(self, source: str) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        import typst

        from .typst import compile_args

        data, options = compile_args(source)
        if self._pool is not None and (self._count >= RECYCLE_AFTER or self._bytes >= RECYCLE_SOURCE):
            self._pool.shutdown(wait=False)  # its running document finishes, then it exits
            self._pool = None
        if self._pool is None:  # spawn: never fork a threaded server
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            self._count = self._bytes = 0
        self._count += 1
        self._bytes += len(data)
        return self._pool.submit(typst.compile, data, **options)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def write_pdf_zip(ws: Worksheet, path: Path, progress: Any = None) -> Path:
    """Every sheet's worksheet and answer key as its own PDF, into the ZIP at `path`.

    One sheet is compiled at a time, in a Compiler's child process, and each PDF goes to disk as it
    arrives; so memory stays that of a few sheets however big the class. `progress(done, total)`
    after each PDF."""
    import zipfile

    from .typst import typst_chunks

    total = 2 * len(ws.sheets)
    jobs = ((sheet_file(number, sheet.student, name), sheet, key)
            for number, sheet in enumerate(ws.sheets, start=1) for name, key in zip(NAMES, (False, True)))
    done = 0
    compiler = Compiler()
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:  # PDFs are compressed already
            pending: list[tuple[str, Any]] = []

            def submit() -> None:
                job = next(jobs, None)
                if job is not None:
                    name, sheet, key = job
                    pending.append((name, compiler.submit("".join(typst_chunks(ws, key, sheets=[sheet])))))

            submit()
            submit()  # one ahead: the next source is written while this one compiles
            while pending:
                name, future = pending.pop(0)
                archive.writestr(zipfile.ZipInfo(name, (2000, 1, 1, 0, 0, 0)), future.result())
                done += 1
                if progress is not None:
                    progress(done, total)
                submit()
    finally:
        compiler.close()
    return path


_ISOLATED: Any = None
_LOCK = threading.Lock()


def pdf_isolated(ws: Worksheet, key: bool = False) -> bytes:
    """to_pdf, compiled in a long-lived, recycled Compiler process: for a server, whose own memory
    Typst's caches would otherwise grow by every document."""
    from .typst import to_typst

    global _ISOLATED
    with _LOCK:
        if _ISOLATED is None:
            _ISOLATED = Compiler()
        future = _ISOLATED.submit(to_typst(ws, key))
    return future.result()
