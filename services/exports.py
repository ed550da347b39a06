"""A class's printed sheets, built off the page's script run and written to disk (no Streamlit).

`start` queues a build and returns its Job at once; one worker thread per process writes one
student's worksheet and answer key at a time, compiled by two Typst child processes
(exercises.worksheets.write_pdf_zip), into a ZIP in a temporary folder, so memory stays that of a few
sheets whatever the class size, and several teachers at once wait in turn instead of each holding a
class's PDFs. The page shows `job.progress` and, when done, serves the file from disk.
Finished files are deleted after KEEP_SECONDS (or when the process ends).

    job = exports.start(assignment, students, "en", space="some", links={name: url})
    job.done, job.fraction, job.error, job.path
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from exercises import worksheets
from exercises.i18n import DEFAULT_LANG, Msg, msg
from exercises.teacher.assignments import AssignmentError
from exercises.worksheets import moodle as moodle_xml
from storage import Assignment

from . import assignments as service
from .submissions import secret

__all__ = ["KEEP_SECONDS", "Job", "get", "moodle", "start"]

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


def moodle(a: Assignment, students: Iterable[str] = (), language: str = DEFAULT_LANG, variants: int = 0) -> bytes:
    """The assignment as Moodle XML (exercises.worksheets.moodle): the class's set, each listed student's
    variants, or `variants` shuffled variants, as a question-bank category."""

    if a.per_student and students:
        sets = [(n, service.exercises_for(a, n)) for n in worksheets.clean_students(students)]
    elif a.per_student:  # shuffled variants that belong to nobody: made, never stored
        sets = [(str(i + 1), a.spec.exercises(f"moodle variant {i + 1}", secret=secret()))
                for i in range(max(variants, 1))]
    else:
        sets = [(None, service.exercises_for(a))]
    return moodle_xml.to_xml(a.title, a.code, sets, language)


def _cleanup() -> None:
    shutil.rmtree(_FOLDER, ignore_errors=True)


import atexit  # noqa: E402

atexit.register(_cleanup)
