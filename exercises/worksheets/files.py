"""A worksheet as data (JSON) and as files: every format's two documents, written into a folder."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..core.model import to_jsonable
from .model import EXP_PLACES, FORMATS, NAMES, Worksheet, option_text, problem, solution_steps
from .text import to_latex, to_markdown
from .typst import compile_args, to_pdf, to_typst, typst_chunks


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
                    d["options"] = [option_text(o, part, lang) for o in part.options]
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


# Typst keeps every document's layouts in caches that are never given back, so a compiler child grows
# with what it compiles. Measured on this project's sheets: a fresh child holds about 56 MiB (Typst and
# its fonts), and each byte of Typst source compiled adds up to about 400 bytes (a 20-item worksheet's
# 18 kB about 6 MiB, its key's 42 kB about 10 MiB, one 40-item level-3 key's 320 kB about 125 MiB).
CHILD_BASE = 56 * 2**20  # a fresh compiler child, fonts loaded
GROWTH_PER_BYTE = 400  # bytes of memory a byte of source may add to a child, at most (measured)
CHILD_MEMORY = 150 * 2**20  # a child is replaced before the next document would take it past this …
RECYCLE_AFTER = 200  # … or after this many documents (a backstop where memory cannot be read)
COMPILERS = 2  # children compiling at once for a class's ZIP: the machine's 2 cores (fewer if it has fewer)


# The compiler child: a bare Python that imports typst only (not the parent's main module, as a
# multiprocessing child would: the app or a script with the whole exercise engine), reads documents
# from its stdin and answers each with the PDF, or the error, and its peak resident size.
_CHILD_CODE = """
import pickle, sys
import typst
try:
    import resource
except ImportError:
    resource = None
into, out = sys.stdin.buffer, sys.stdout.buffer
while True:
    head = into.read(8)
    if len(head) < 8:
        break
    data, options = pickle.loads(into.read(int.from_bytes(head, "big")))
    try:
        reply = [True, typst.compile(data, **options)]
    except Exception as error:
        reply = [False, type(error).__name__ + ": " + str(error)]
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if resource else 0
    blob = pickle.dumps(reply + [usage * (1 if sys.platform == "darwin" else 1024)])
    out.write(len(blob).to_bytes(8, "big") + blob)
    out.flush()
"""


class CompileError(RuntimeError):
    """Typst refused a document (the message is Typst's)."""


class _Child:
    """One compiler process and what it is estimated to hold: its resident size as last read from
    it, plus GROWTH_PER_BYTE for every byte of source sent since. A thread of its own sends it each
    document and waits for the PDF, so the caller gets a Future and goes on."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _CHILD_CODE], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="typst")
        self.documents = 0
        self.sent = 0  # bytes of source sent
        self.measured = (CHILD_BASE, 0)  # (resident bytes, bytes sent when they were read)
        self._futures: list[Any] = []

    @property
    def running(self) -> int:
        """Documents sent and not yet compiled."""
        self._futures = [f for f in self._futures if not f.done()]
        return len(self._futures)

    def estimate(self, more: int = 0) -> int:
        rss, at = self.measured
        return rss + GROWTH_PER_BYTE * (self.sent - at + more)

    def full(self, size: int) -> bool:
        """Whether a document of `size` bytes of source should go to a fresh child instead."""
        return self.documents > 0 and (self.documents >= RECYCLE_AFTER or self.estimate(size) > CHILD_MEMORY)

    def submit(self, data: bytes, options: dict) -> Any:
        self.documents += 1
        self.sent += len(data)
        future = self._thread.submit(self._compile, data, options, self.sent)
        self._futures.append(future)
        return future

    def _compile(self, data: bytes, options: dict, sent: int) -> bytes:
        blob = pickle.dumps((data, options))
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(len(blob).to_bytes(8, "big") + blob)
        stdin.flush()
        head = stdout.read(8)
        if len(head) < 8:
            raise CompileError("the Typst compiler process ended")
        ok, result, rss = pickle.loads(stdout.read(int.from_bytes(head, "big")))
        if rss:
            self.measured = (rss, sent)
        if not ok:
            raise CompileError(result)
        return result

    def _close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()  # the child ends when its input does
        except OSError:  # it has ended already
            pass
        self.process.wait()

    def shutdown(self, wait: bool) -> None:
        """Its documents sent so far are compiled, then it exits (at once, or behind them)."""
        self._thread.submit(self._close)
        self._thread.shutdown(wait=wait)


class Compiler:
    """Typst in up to `children` child processes that only import typst, each replaced by a fresh
    one before a document would take its memory past CHILD_MEMORY (Typst's caches grow with every
    document compiled and are never given back), so memory stays within about children ×
    CHILD_MEMORY whatever the number of documents. A document that alone needs more (a long key: one
    student's 40 level-3 forward passes) is compiled by a fresh child with no other child alive when
    it starts; small documents may run beside it."""

    def __init__(self, children: int = 1) -> None:
        self._size = max(1, children)
        self._children: list[_Child | None] = [None] * self._size

    def pids(self) -> list[int]:
        """The process ids of the running children."""
        return [child.process.pid for child in self._children if child is not None]

    def submit(self, source: str) -> Any:
        data, options = compile_args(source)
        if CHILD_BASE + GROWTH_PER_BYTE * len(data) > CHILD_MEMORY:  # a big document: alone
            self.close()
            index = 0
        else:  # the least busy child (the first among equals): each core compiles while sources are written
            index = min(range(self._size), key=lambda i: (self._children[i].running if self._children[i] else 0, i))
        child = self._children[index]
        if child is not None and (child.full(len(data)) or child.process.poll() is not None):
            child.shutdown(wait=True)  # its documents finish first: never two generations of one child at once
            child = None  # (a child that ended, killed or out of memory, is replaced too)
        if child is None:
            child = self._children[index] = _Child()
        return child.submit(data, options)

    def close(self) -> None:
        for index, child in enumerate(self._children):
            if child is not None:
                child.shutdown(wait=True)
                self._children[index] = None


def compilers() -> int:
    """How many compiler children a class's ZIP uses: COMPILERS, at most the machine's cores."""
    return max(1, min(COMPILERS, os.cpu_count() or 1))


def sheet_pdfs(ws: Worksheet, progress: Any = None) -> Iterator[tuple[str, bytes]]:
    """Every sheet's worksheet and answer key as its own PDF, (file name, PDF) in the class list's order.

    The sources are written here, one sheet at a time, and compiled in a Compiler's compilers()
    children, each PDF handed on as it arrives; so memory stays that of a few sheets however big the
    class. `progress(done, total)` after each PDF."""
    total = 2 * len(ws.sheets)
    jobs = ((sheet_file(number, sheet.student, name), sheet, key)
            for number, sheet in enumerate(ws.sheets, start=1) for name, key in zip(NAMES, (False, True)))
    done = 0
    children = compilers()
    compiler = Compiler(children)
    try:
        pending: list[tuple[str, Any]] = []

        def submit() -> None:
            job = next(jobs, None)
            if job is not None:
                name, sheet, key = job
                pending.append((name, compiler.submit("".join(typst_chunks(ws, key, sheets=[sheet])))))

        for _ in range(2 * children):  # a document ahead per child: sources are written while others compile
            submit()
        while pending:
            name, future = pending.pop(0)
            yield name, future.result()
            done += 1
            if progress is not None:
                progress(done, total)
            submit()
    finally:
        compiler.close()


def write_pdf_zip(ws: Worksheet, path: Path, progress: Any = None) -> Path:
    """Every sheet's worksheet and answer key as its own PDF (sheet_pdfs), into the ZIP at `path`."""

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:  # PDFs are compressed already
        for name, pdf in sheet_pdfs(ws, progress):
            archive.writestr(zipfile.ZipInfo(name, (2000, 1, 1, 0, 0, 0)), pdf)
    return path


def write_pdf_files(ws: Worksheet, folder: Path, progress: Any = None) -> list[Path]:
    """Every sheet's worksheet and answer key as its own PDF (sheet_pdfs), into `folder`: a class's
    PDFs from the command line, bounded in memory like the ZIP."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, pdf in sheet_pdfs(ws, progress):
        path = folder / name
        path.write_bytes(pdf)
        paths.append(path)
    return paths


_ISOLATED: Any = None
_LOCK = threading.Lock()


def pdf_isolated(ws: Worksheet, key: bool = False) -> bytes:
    """to_pdf, compiled in a long-lived, recycled Compiler process: for a server, whose own memory
    Typst's caches would otherwise grow by every document."""
    global _ISOLATED
    with _LOCK:
        if _ISOLATED is None:
            _ISOLATED = Compiler()
        future = _ISOLATED.submit(to_typst(ws, key))
    return future.result()
