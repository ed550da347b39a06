"""Unbounded work in one request. Every text box has a length bound (max_chars), a class
list is refused before it is parsed when it is longer than one can be, and the command line's class
PDFs are made a sheet at a time in recycled child processes, so its memory does not grow with the class."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from exercises import worksheets
from exercises.teacher.assignments import AssignmentError
from exercises.worksheets import files
from services import assignments as service

ROOT = Path(__file__).resolve().parent.parent
TEXT_BOXES = ("text_input", "text_area", "chat_input")


def _text_boxes_without_a_bound() -> list[str]:
    missing = []
    for path in sorted([*ROOT.glob("ui/*.py"), *ROOT.glob("app_pages/*.py"), ROOT / "app.py"]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in TEXT_BOXES \
                    and not any(k.arg == "max_chars" for k in node.keywords):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return missing


def test_every_text_box_has_max_chars():
    assert _text_boxes_without_a_bound() == []


@pytest.mark.parametrize("text", ["Ada\n" * 2_000_000, "x" * (worksheets.MAX_CLASS_LIST_CHARS + 1),
                                  "a,b,c\n" * 1_400_000])
def test_a_class_list_longer_than_one_can_be_is_refused_before_parsing(text):
    """7.9 MB cost 1.12 s of CPU before it was refused: now a length check, with a clear message."""
    started = time.process_time()
    with pytest.raises(AssignmentError) as refused:
        service.class_list(text)
    assert time.process_time() - started < 0.05
    assert refused.value.message.key == "export.error.list_too_long"
    said = refused.value.message.render("en")
    assert f"{len(text)} characters" in said and str(worksheets.MAX_CLASS_LIST_CHARS) in said
    with pytest.raises(AssignmentError):
        worksheets.read_students(text)


def test_the_longest_class_list_is_read():
    names = [f"Student number {i:03d} of a long class list with a long name {'x' * 20}" for i in range(200)]
    text = "\n".join(names)
    assert len(text) < worksheets.MAX_CLASS_LIST_CHARS
    assert service.class_list(text) == tuple(names)


def test_the_class_list_boxes_are_bounded_on_the_page(fresh_sqlite):
    created = service.create("PDFs", [{"kind": "scores", "level": 1, "count": 1}], 3, per_student=True)
    code = created.assignment.code
    at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    at.session_state["assign.created"] = {"code": code, "title": "PDFs", "key": None, "assignment": created.assignment}
    at.run()
    assert at.text_area(key=f"assign.students.{code}").max_chars == worksheets.MAX_CLASS_LIST_CHARS


# ---------------------------------------------------------------- the command line's class PDFs

_MEASURED = """
import resource, sys
from exercises.cli.main import main
code = main(sys.argv[1:])
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


def _class_pdfs(tmp_path: Path, students: int) -> tuple[float, float, list[str]]:
    """(the CLI process's peak MiB, its largest child's peak MiB, the files written) for a class."""
    names = tmp_path / f"names-{students}.txt"
    names.write_text("\n".join(f"Student {i:03d}" for i in range(students)) + "\n", encoding="utf-8")
    out = tmp_path / f"out-{students}"
    result = subprocess.run([sys.executable, "-c", _MEASURED, "worksheet", "--kinds", "attention,backprop,softmax,scores",
                             "--level", "2", "--count", "1", "--students", str(names), "--format", "pdf",
                             "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    _, own, child = result.stdout.strip().splitlines()[-1].split()
    return int(own) / 1024, int(child) / 1024, sorted(p.name for p in out.glob("*.pdf"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in kB and /proc: Linux")
def test_the_command_lines_class_pdfs_do_not_grow_with_the_class(tmp_path):
    """One class-wide PDF held every student's layouts in one process: 2.78 GB for 50 students,
    11.2 GB for 200. Now one file pair per student, compiled in recycled children: the process's
    peak for 12 students is that for 2 (it was 140 and 242 MiB), and no child passes the compiler's cap."""
    small_own, small_child, small_files = _class_pdfs(tmp_path, 2)
    own, child, written = _class_pdfs(tmp_path, 12)
    assert small_files == ["answer-key-001-student-000.pdf", "answer-key-002-student-001.pdf",
                           "worksheet-001-student-000.pdf", "worksheet-002-student-001.pdf"]
    assert len(written) == 24 and all((tmp_path / "out-12" / name).read_bytes()[:4] == b"%PDF" for name in written)
    assert own < small_own + 30, (small_own, own)  # MiB: a class of 12 costs what one of 2 does
    assert child < files.CHILD_MEMORY / 2**20 + 50, child  # a compiler child recycled before its cap
