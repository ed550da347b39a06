"""python -m exercises worksheet: write a worksheet and its answer key from the command line.

    python -m exercises worksheet --kinds softmax,scores --level 2 --count 4 --seed 3 --format pdf --out DIR

With --students (per-student variants) the PDFs are one worksheet and one answer key per student
(worksheet-001-ada.pdf, answer-key-001-ada.pdf …), compiled like the app's class ZIP: in recycled
Typst child processes, a sheet at a time, so memory stays that of a few sheets whatever the class
(one class-wide PDF held every student's layouts in one process: 11 GB for 200 students).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from ..i18n import DEFAULT_LANG, languages, t
from ..teacher.assignments import AssignmentError, ItemSpec, make_spec
from .files import CompileError, write, write_pdf_files
from .model import FORMATS, MAX_CLASS_LIST_CHARS, SPACES, build, read_students
from .typst import MissingFont

NAME = "worksheet"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="write a worksheet and its answer key (PDF, Markdown, LaTeX or JSON)",
                       description="Write DIR/worksheet.FMT and DIR/answer-key.FMT.")
    p.add_argument("--kinds", required=True, help="comma-separated kinds, e.g. softmax,scores")
    p.add_argument("--level", default="1", help="level of every item (default 1)")
    p.add_argument("--count", default="1", help="exercises per kind (default 1)")
    p.add_argument("--seed", default="0", help="the assignment's seed (default 0)")
    p.add_argument("--format", default="pdf", help="pdf, md, tex, json or all (default pdf)")
    p.add_argument("--out", required=True, help="the folder to write into (created if missing)")
    p.add_argument("--students", help="a text file of names, one per line: one variant per student "
                   "(PDFs: one worksheet and one key file per student)")
    p.add_argument("--title", default=None, help="the title printed on the sheets")
    p.add_argument("--code", default=None, help="an assignment code to print on the sheets")
    p.add_argument("--lang", type=_lang, default=DEFAULT_LANG, help="language of the texts (en or zh; default en)")
    p.add_argument("--space", choices=SPACES, default="some", help="working space under each item (default some)")


def _lang(text: str) -> str:
    if text not in languages():
        raise argparse.ArgumentTypeError(f"unknown language {text!r}; choose one of {', '.join(languages())}")
    return text


def run(args: argparse.Namespace) -> int:
    def fail(text: str) -> int:
        print(f"error: {text}", file=sys.stderr)
        return 2

    formats = list(FORMATS) if args.format == "all" else [args.format]
    if any(f not in FORMATS for f in formats):
        return fail(f"unknown format {args.format!r}; choose one of {', '.join(FORMATS)} or all")
    kinds = [k.strip() for k in str(args.kinds).split(",") if k.strip()]
    students: list[str] = []
    if args.students:
        try:
            with open(args.students, "rb") as file:  # read no further than a class list can be long
                data = file.read(4 * MAX_CLASS_LIST_CHARS + 1)
            if len(data) > 4 * MAX_CLASS_LIST_CHARS:
                return fail(f"{args.students!r} is too long for a class list (at most {MAX_CLASS_LIST_CHARS} "
                            "characters)")
            students = read_students(data.decode("utf-8-sig"))
        except OSError as err:
            return fail(f"cannot read the students file {args.students!r}: {err.strerror}")
        except UnicodeDecodeError:
            return fail(f"{args.students!r} is not a UTF-8 text file")
        except AssignmentError as err:
            return fail(err.message.render(args.lang))
    try:
        items = [ItemSpec(k, int(args.level), int(args.count)) for k in kinds]
    except ValueError:
        return fail("--level and --count must be whole numbers")
    title = args.title or t("worksheet.default_title", args.lang)
    try:
        spec = make_spec(title, items, args.seed, per_student=bool(args.students))
        ws = dataclasses.replace(build(spec, students, args.code, args.lang), space=args.space)
    except AssignmentError as err:
        return fail(err.message.render(args.lang))
    try:
        for fmt in formats:
            per_student = fmt == "pdf" and spec.per_student
            for path in write_pdf_files(ws, Path(args.out)) if per_student else write(ws, fmt, Path(args.out)):
                print(path)
    except MissingFont as err:
        return fail(str(err))
    except CompileError as err:
        return fail(f"Typst could not make the PDF: {err}")
    except OSError as err:
        return fail(f"cannot write into {args.out!r}: {err.strerror}")
    return 0
