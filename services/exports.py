"""A class's printed sheets and its Moodle XML, built off the page's script run and written to disk
(no Streamlit).

`start` queues a build and returns its Job at once; one worker thread per process writes one
student's worksheet and answer key at a time, compiled by two Typst child processes
(exercises.worksheets.write_pdf_zip), into a ZIP in a temporary folder, so memory stays that of a few
sheets whatever the class size, and several teachers at once wait in turn instead of each holding a
class's PDFs. The page shows `job.progress` and, when done, serves the file from disk.
Finished files are deleted after KEEP_SECONDS (or when the process ends).

The Moodle XML (and the QTI 2.1 package, fmt="qti") goes the same way (`start_moodle`): the same
worker and the same print cap (worksheets.MAX_EXERCISES); a child process (MOODLE_CHILD_MEMORY of
address space at most) reads and makes the exercises and writes the questions one student's set at a
time into a file, so its CPU (a minute for a big class) is never the server process's and its memory
stays that of one set.

    job = exports.start(assignment, students, "en", space="some", links={name: url})
    job = exports.start_moodle(assignment, students, "en", variants=5)
    job.done, job.fraction, job.error, job.path
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from exercises import worksheets
from exercises.core.model import Exercise
from exercises.i18n import DEFAULT_LANG, Msg, msg
from exercises.teacher.assignments import AssignmentError
from exercises.worksheets import moodle as moodle_xml
from exercises.worksheets import qti as qti_package
from storage import Assignment

from . import assignments as service
from . import child_process
from .submissions import secret

__all__ = ["KEEP_SECONDS", "MOODLE_CHILD_MEMORY", "Job", "get", "moodle", "start", "start_moodle", "write_moodle"]

KEEP_SECONDS = 3600
_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sheets")  # one build at a time per process
_JOBS: dict[str, Job] = {}
_LOCK = threading.Lock()
_FOLDER = Path(tempfile.mkdtemp(prefix="attention-sheets-"))


@dataclasses.dataclass
class Job:
    id: str
    file_name: str
    path: Path
    total: int = 1
    finished: int = 0
    done: bool = False
    error: Msg | None = None
    started: float = dataclasses.field(default_factory=time.monotonic)
    mime: str = "application/zip"

    @property
    def fraction(self) -> float:
        return min(self.finished / max(self.total, 1), 1.0)

    def read(self) -> bytes:
        """The finished file (read from disk when the download is asked for)."""
        return self.path.read_bytes()


def _sweep() -> None:
    now = time.monotonic()
    with _LOCK:
        for job_id, job in list(_JOBS.items()):
            if job.done and now - job.started > KEEP_SECONDS:
                job.path.unlink(missing_ok=True)
                del _JOBS[job_id]


def check_size(students: int, per_sheet: int) -> None:
    """AssignmentError past worksheets.MAX_EXERCISES exercises in one print run."""
    if students * per_sheet > worksheets.MAX_EXERCISES:
        raise AssignmentError(msg("export.error.too_big", students=students, items=per_sheet,
                                  limit=worksheets.MAX_EXERCISES))


def start(a: Assignment, students: Iterable[str] = (), language: str = DEFAULT_LANG, space: str = "some",
          links: Mapping[str, str] | None = None) -> Job:
    """Queue the PDFs of `a` (per student when it has per-student variants); returns at once.
    AssignmentError for a class list that is bad or too big."""
    _sweep()
    names = tuple(students) if a.per_student else ()
    if a.per_student:
        names = tuple(worksheets.clean_students(names))
    check_size(max(len(names), 1), len(a.spec.slots()))
    if space not in worksheets.SPACES:
        space = "some"
    job_id = secrets.token_urlsafe(12)
    job = Job(job_id, f"sheets-{a.code}.zip", _FOLDER / f"{job_id}.zip", total=2 * max(len(names), 1))
    with _LOCK:
        _JOBS[job_id] = job
    _POOL.submit(_build, job, a, names, language, space, dict(links or {}))
    return job


def get(job_id: str | None) -> Job | None:
    with _LOCK:
        return _JOBS.get(job_id or "")


def _build(job: Job, a: Assignment, names: tuple[str, ...], language: str, space: str,
           links: dict[str, str]) -> None:
    def progress(done: int, total: int) -> None:
        job.finished, job.total = done, total

    try:
        ws = dataclasses.replace(service.worksheet(a, names, language), space=space,
                                 links=tuple((n, links[n]) for n in names if n in links))
        worksheets.write_pdf_zip(ws, job.path, progress)
    except worksheets.MissingFont:
        job.error = msg("assign.error.pdf_font")
    except AssignmentError as err:
        job.error = err.message
    except Exception:  # noqa: BLE001 - the page says it failed; nothing else depends on it
        job.error = msg("export.error.failed")
        job.path.unlink(missing_ok=True)
    finally:
        job.done = True


# ---------------------------------------------------------------- Moodle XML, in a child process

MOODLE_CHILD_MEMORY = 1024 * 2**20  # the child's address space: it imports the engine (about 200 MB) and holds one set

# The Moodle child: reads one JSON line {code, names, variants, lang, path}, opens the same database
# (the environment's DATABASE_URL or SQLite file), makes the sets there (stored exercises read, missing
# ones generated and stored: none of that CPU is the server's) and writes the XML into `path` piece by
# piece, answering each piece with a line (the head, each set, the end) so the parent can show progress.
_MOODLE_CHILD = """
from services import exports

def written():
    sys.stdout.write("1\\n")
    sys.stdout.flush()

exports.write_moodle_here(json.loads(sys.stdin.readline()), written)
"""

Sets = Iterator[tuple[str | None, Sequence[Exercise]]]  # (a student's name, or None for the class; exercises)


class ExportFailed(RuntimeError):
    """The Moodle child ended before the file was written (out of memory, killed, the database gone)."""


def _moodle_sets(a: Assignment, students: Iterable[str], variants: int) -> tuple[int, Sets]:
    """(how many sets, the sets made one at a time): the class's set, each listed student's variants,
    or `variants` shuffled variants. AssignmentError for a bad class list or past the print cap."""
    per_sheet = len(a.spec.slots())
    if a.per_student and students:
        names = worksheets.clean_students(students)
        check_size(len(names), per_sheet)
        return len(names), ((n, service.exercises_for(a, n)) for n in names)
    if a.per_student:  # shuffled variants that belong to nobody: made, never stored
        count = max(variants, 1)
        check_size(count, per_sheet)
        return count, ((str(i + 1), a.spec.exercises(f"moodle variant {i + 1}", secret=secret())) for i in range(count))
    return 1, iter([(None, service.exercises_for(a))])


# the question-bank formats the child writes: (file suffix, MIME type)
BANK_FORMATS = {"moodle": ("xml", "application/xml"), "qti": ("zip", "application/zip")}


def write_moodle_here(head: Mapping[str, Any], written: Any = None) -> None:
    """In the Moodle child: the XML of assignment head["code"] for head["names"] (or head["variants"]
    shuffled variants) written into head["path"], one set at a time; `written()` after each piece.
    head["format"] "qti": a QTI 2.1 package (a zip) instead, written the same way."""

    a = service.load(head["code"])
    if a is None:
        raise ExportFailed(f"no assignment {head['code']!r}")
    _count, sets = _moodle_sets(a, head["names"], head["variants"])
    if head.get("format") == "qti":
        with zipfile.ZipFile(head["path"], "w", zipfile.ZIP_DEFLATED) as package:
            for files in qti_package.package_pieces(a.title, a.code, sets, head["lang"]):
                for name, text in files:
                    package.writestr(name, text)
                if written is not None:
                    written()
        return
    with open(head["path"], "w", encoding="utf-8") as file:
        for piece in moodle_xml.xml_pieces(a.title, a.code, sets, head["lang"]):
            file.write(piece)
            if written is not None:
                written()


def write_moodle(path: Path, a: Assignment, students: Iterable[str] = (), language: str = DEFAULT_LANG,
                 variants: int = 0, progress: Any = None, fmt: str = "moodle") -> Path:
    """The Moodle XML of `a` written to `path` by a child process (write_moodle_here); `progress(done)`
    after each set. AssignmentError at once for a bad class list or past the print cap; ExportFailed
    when the child ends before the end."""
    names = tuple(students)
    count, _sets = _moodle_sets(a, names, variants)  # checked here, made in the child
    head = {"code": a.code, "names": list(names), "variants": variants, "lang": language, "path": str(path),
            "format": fmt}
    try:
        child = child_process.start(_MOODLE_CHILD, MOODLE_CHILD_MEMORY, head)
    except OSError as err:
        raise ExportFailed(f"the Moodle XML process ended ({err})") from None
    assert child.stdout is not None
    try:
        pieces = 0
        while child.stdout.readline():
            pieces += 1
            if progress is not None and 2 <= pieces <= count + 1:  # the head, then one piece a set
                progress(pieces - 1)
        if child.wait() != 0 or pieces != count + 2:
            raise ExportFailed(f"the Moodle XML process ended with {child.returncode} after {pieces} pieces")
    except OSError as err:
        raise ExportFailed(f"the Moodle XML process ended ({err})") from None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return path


def start_moodle(a: Assignment, students: Iterable[str] = (), language: str = DEFAULT_LANG, variants: int = 0,
                 fmt: str = "moodle") -> Job:
    """Queue the assignment's Moodle XML (see `moodle`), or with fmt "qti" its QTI 2.1 package; returns at
    once. AssignmentError for a class list that is bad or past the print cap."""
    _sweep()
    names = tuple(students)
    count, _sets = _moodle_sets(a, names, variants)  # nothing made yet: the checks only
    job_id = secrets.token_urlsafe(12)
    suffix, mime = BANK_FORMATS[fmt]
    job = Job(job_id, f"{fmt}-{a.code}.{suffix}", _FOLDER / f"{job_id}.{suffix}", total=count, mime=mime)
    with _LOCK:
        _JOBS[job_id] = job
    _POOL.submit(_build_moodle, job, a, names, language, variants, fmt)
    return job


def _build_moodle(job: Job, a: Assignment, names: tuple[str, ...], language: str, variants: int,
                  fmt: str = "moodle") -> None:
    def progress(done: int) -> None:
        job.finished = done

    try:
        write_moodle(job.path, a, names, language, variants, progress, fmt)
    except AssignmentError as err:
        job.error = err.message
    except Exception:  # noqa: BLE001 - the page says it failed; nothing else depends on it
        job.error = msg(f"export.error.{fmt}_failed")
        job.path.unlink(missing_ok=True)
    finally:
        job.done = True


def moodle(a: Assignment, students: Iterable[str] = (), language: str = DEFAULT_LANG, variants: int = 0,
           fmt: str = "moodle") -> bytes:
    """The assignment as Moodle XML (exercises.worksheets.moodle): the class's set, each listed student's
    variants, or `variants` shuffled variants, as a question-bank category; made now, by the same
    child process as `start_moodle` (for scripts and tests: the page uses start_moodle)."""
    with tempfile.TemporaryDirectory(prefix="attention-moodle-") as folder:
        path = Path(folder) / f"bank.{BANK_FORMATS[fmt][0]}"
        return write_moodle(path, a, students, language, variants, fmt=fmt).read_bytes()


def _cleanup() -> None:
    shutil.rmtree(_FOLDER, ignore_errors=True)


import atexit  # noqa: E402

atexit.register(_cleanup)
