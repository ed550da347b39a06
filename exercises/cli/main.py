"""attention-by-hand (or python -m exercises): list | generate | grade | worksheet | check.

    attention-by-hand generate softmax --seed 1 --level 2 --json > ex.json      # a student file: no answers
    attention-by-hand generate softmax --seed 1 --level 2 --json --key           # with the answers
    attention-by-hand grade ex.json "1 0 0; 0.12 0.88 0; 1/3 1/3 1/3" --json
    attention-by-hand check my-steps.json                                        # Check my work (cli/check.py)

`grade` never trusts what a file says the answers are: it rebuilds the exercise from its kind, level,
seed and version and refuses a file whose given values, parts or version differ from the rebuilt one.

Exit codes (EXIT_*): 0 right (every cell), 1 graded but not all right, 2 bad usage (unknown kind,
level, language, an unreadable, foreign, edited or oversized exercise file), 3 an answer that cannot be
read (wrong shape, a typo: nothing graded); 141 when the output pipe closed early (| head). Whatever a
file holds, the answer is one line on stderr, never a traceback: a file is bounded in size, nesting and
values before it is parsed (MAX_FILE_BYTES, MAX_DEPTH, MAX_VALUES).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

import numpy as np

from .. import worksheets
from ..core import engine, grading
from ..core.model import Exercise
from ..core.parser import AnswerError
from ..i18n import Msg, languages, t
from . import check, selftest

EXIT_RIGHT, EXIT_WRONG, EXIT_USAGE, EXIT_MALFORMED, EXIT_PIPE = 0, 1, 2, 3, 141


class CliError(Exception):
    """A problem with what was asked on the command line: printed, exit status 2."""


class MalformedAnswer(CliError):
    """An answer that cannot be read: printed, exit status 3."""


def _matrix_text(value: np.ndarray, indent: str = "    ") -> str:
    cells = [[selftest.format_cell(x) if np.isfinite(x) or np.isneginf(x) else str(x) for x in row]
             for row in np.atleast_2d(value)]
    width = max(len(c) for row in cells for c in row)
    return "\n".join(indent + "  ".join(c.rjust(width) for c in row) for row in cells)


def describe(ex: Exercise, lang: str = "en") -> str:
    """A plain-text statement of the exercise."""
    lines = [f"{t(f'kind.{ex.kind}.title', lang)}  (kind {ex.kind}, level {ex.level}, seed {ex.seed})",
             engine.prompt(ex, lang)]
    policy = grading.rounding_policy(ex, lang)
    lines += [policy, ""] if policy else [""]
    for name, value in ex.given.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            lines += [f"{name} =", _matrix_text(value)]
        else:
            lines.append(f"{name} = {value}")
    lines.append("")
    for part in ex.parts:
        if part.prompt:
            lines.append(t(part.prompt, lang, **part.params))
        if part.is_choice:
            lines += [f"  {chr(ord('A') + i)}. {worksheets.model.option_text(o, part, lang)}"
                      for i, o in enumerate(part.options)]
            letters = ", ".join(chr(ord("A") + i) for i in range(len(part.options)))
            lines.append(f"answer {part.name}: one letter, {letters}")
        else:
            lines.append(f"find {part.name}: {part.shape[0]}×{part.shape[1]}"
                         + ("" if part.decimals == 0 else f", to {part.decimals} decimals"))
        if part.prompt or part.is_choice:
            lines.append("")
    return "\n".join(lines).rstrip()


_MAKE = "make one with `attention-by-hand generate KIND --json`"

# What a file may hold, checked before parsing: the biggest exercise file (any kind, level 3, with its
# answers) is under 5 kB, nests 5 deep and holds under 200 values.
MAX_FILE_BYTES = 256 * 1024
MAX_DEPTH = 16  # brackets inside brackets
MAX_VALUES = 20_000  # numbers, strings and literals
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]|[^\s\[\]{},:"]+')


def bounded_json(text: str, what: str, hint: str = _MAKE) -> Any:
    """json.loads(text), once its nesting and number of values are known to be small; CliError for
    text too deep, too many values or not JSON (never RecursionError, nor a number too long to read)."""
    depth = values = 0
    for token in _JSON_TOKEN.finditer(text):
        first = token.group()[0]
        if first in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise CliError(f"{what} nests deeper than {MAX_DEPTH} levels; {hint}")
        elif first in "]}":
            depth -= 1
        else:
            values += 1
            if values > MAX_VALUES:
                raise CliError(f"{what} holds more than {MAX_VALUES} values; {hint}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise CliError(f"{what} is not JSON (line {err.lineno}, column {err.colno}: {err.msg}); {hint}") from None
    except (ValueError, RecursionError):  # a number of thousands of digits
        raise CliError(f"{what} is not JSON this command reads (a number too long); {hint}") from None


def _read_bounded(source: str) -> str:
    """The text of `source` (a path, or - for stdin): at most MAX_FILE_BYTES, UTF-8 (a BOM allowed)."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        else:
            with open(source, "rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise CliError(f"cannot read the exercise file {source!r}: {err.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CliError(f"{source!r} is over {MAX_FILE_BYTES // 1024} kB, far more than an exercise file; {_MAKE}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CliError(f"{source!r} is not a text file (not UTF-8); {_MAKE}") from None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def student_dict(ex: Exercise) -> dict[str, Any]:
    """The exercise as a student file: kind, level, seed, version, given values and what to find,
    no reference answers."""
    d = ex.to_dict()
    for part in d["parts"]:
        part.pop("reference", None)
    d["answers"] = "not in this file: `grade` works them out again"
    return d


def _load_exercise(source: str) -> Exercise:
    """The exercise a file names, rebuilt from its kind, level, seed and version; CliError when the
    file is unreadable, or its given values, parts or version differ from the rebuilt exercise."""
    d = bounded_json(_read_bounded(source), repr(source))
    if not isinstance(d, dict) or not all(k in d for k in ("kind", "level", "seed", "given", "parts")):
        raise CliError(f"{source!r} is not an exercise (it needs kind, level, seed, given and parts); {_MAKE}")
    if not isinstance(d["kind"], str) or not all(_whole(d.get(k, 1)) for k in ("level", "seed", "version")):
        raise CliError(f"{source!r} is not an exercise (kind is a word; level, seed and version whole numbers); "
                       f"{_MAKE}")
    if not isinstance(d["given"], dict) or not isinstance(d["parts"], list) \
            or not all(isinstance(p, dict) for p in d["parts"]) or not isinstance(d.get("params", {}), dict):
        raise CliError(f"{source!r} is not an exercise (given and params are objects, parts a list of objects); "
                       f"{_MAKE}")
    for name, value in d["given"].items():
        if not _numeric(value):
            raise CliError(f"{source!r}: the given value {name!r} is not a number, a flag or a matrix of numbers")
    kind, level, seed = d["kind"], d["level"], d["seed"]
    if kind not in engine.KINDS:
        raise CliError(f"{source!r}: unknown kind {kind!r}; {_MAKE}")
    try:
        ex = engine.generate(kind, seed, level)
    except (ValueError, TypeError, OverflowError) as err:
        raise CliError(f"{source!r} is not an exercise ({err}); {_MAKE}") from None
    if d.get("version", 1) != ex.version:
        raise CliError(f"{source!r} was made by version {d.get('version')} of the {kind!r} exercises and this is "
                       f"version {ex.version}: its answers cannot be rebuilt as they were; make a new file")
    stored = dict(d)
    stored["parts"] = [{**p, "reference": p.get("reference", rebuilt["reference"])}
                       for p, rebuilt in zip(d["parts"], ex.to_dict()["parts"])]
    try:  # the file's own claims, read only to compare: whatever they hold, a wrong file is bad input
        claimed = Exercise.from_dict(stored)
        same = claimed == ex
        what = "" if same else "its answers" if _same_problem(claimed, ex) else "its given values or parts"
    except Exception as err:  # noqa: BLE001 - no traceback for any file
        raise CliError(f"{source!r} is not an exercise ({type(err).__name__}: {err}); {_MAKE}") from None
    if not same:
        raise CliError(f"{source!r} does not match exercise {kind} level {level} seed {seed}: {what} were "
                       f"changed; grading uses only the rebuilt exercise, {_MAKE}")
    return ex


def _numeric(value: Any) -> bool:
    if isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return value in ("-inf", "inf")
    if isinstance(value, list):
        return all(_numeric(v) for v in value)
    return False


def _same_problem(a: Exercise, b: Exercise) -> bool:
    strip = [{k: v for k, v in p.items() if k != "reference"} for p in a.to_dict()["parts"]]
    return strip == [{k: v for k, v in p.items() if k != "reference"} for p in b.to_dict()["parts"]] \
        and a.to_dict()["given"] == b.to_dict()["given"]


def _parse_answer_arg(text: str) -> Any:
    """A JSON object {part: answer} for several parts, else the text of a one-part answer."""
    stripped = text.strip()
    if stripped.startswith("{"):
        if len(stripped) > MAX_FILE_BYTES:
            raise CliError(f"the answer is over {MAX_FILE_BYTES // 1024} kB")
        answer = bounded_json(stripped, "the answer, which looks like JSON,",
                              'write {"part": "matrix text"} or the matrix text')
        if not isinstance(answer, dict):
            raise CliError("a JSON answer must be an object {part name: answer}")
        return answer
    return text


def _feedback_json(fb: grading.Feedback, lang: str = "en") -> dict[str, Any]:
    def text(m: Msg | None) -> str | None:
        return m.render(lang) if m is not None else None
    return {
        "score": fb.score, "correct": fb.correct, "graded": fb.graded,
        "misconception": fb.misconception, "message": text(fb.message),
        "warnings": [w.render(lang) for w in fb.warnings],
        "parts": {name: {"score": p.score, "format_error": text(p.format_error),
                         "misconception": p.misconception,
                         "cells": p.status.tolist() if p.status is not None else None,
                         "cell_errors": [{"row": r + 1, "col": c + 1, "message": m.render(lang)}
                                         for (r, c), m in p.cell_errors.items()]}
                  for name, p in fb.parts.items()},
    }


def _feedback_text(fb: grading.Feedback, lang: str = "en") -> str:
    lines = [fb.message.render(lang)] if fb.message else []
    if fb.graded:
        lines.insert(0, f"score {fb.score:.3f}")
    for name, p in fb.parts.items():
        if p.format_error:
            lines.append(f"{name}: {p.format_error.render(lang)}")
        elif p.status is not None:
            marks = "\n".join("    " + " ".join({"right": "✓", "wrong": "✗", "consistent": "≈"}[s] for s in row)
                              for row in p.status)
            lines.append(f"{name}: {p.score:.3f}\n{marks}")
        if p.misconception:
            lines.append(f"  likely mistake: {t('misconception.' + p.misconception, lang)}")
    lines += [f"warning: {w.render(lang)}" for w in fb.warnings]
    return "\n".join(lines)


def _lang(text: str) -> str:
    """A language the catalogs have (argparse type): anything else is bad usage, never silently English."""
    if text not in languages():
        raise argparse.ArgumentTypeError(f"unknown language {text!r}; choose one of {', '.join(languages())}")
    return text


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attention-by-hand", description="Attention exercises by hand.",
                                     epilog="exit codes: 0 right, 1 wrong, 2 bad usage or file, 3 unreadable answer")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the exercise kinds and their levels")
    gen = sub.add_parser("generate", help="make one exercise")
    gen.add_argument("kind")
    gen.add_argument("--seed", default="0")
    gen.add_argument("--level", default="1")
    gen.add_argument("--json", action="store_true", help="print the exercise as JSON (a student file: no answers)")
    gen.add_argument("--key", action="store_true", help="with the answers (JSON) or the answers and solution (text)")
    gen.add_argument("--lang", type=_lang, default="en", help="language of the texts (en or zh)")
    grd = sub.add_parser("grade", help="grade an answer to an exercise saved as JSON")
    grd.add_argument("file", help="the exercise JSON file, or - for standard input")
    grd.add_argument("answer", help='matrix text such as "1 2; 3 4", or JSON {"part": "…"} for several parts')
    grd.add_argument("--json", action="store_true", help="print the feedback as JSON")
    grd.add_argument("--lang", type=_lang, default="en", help="language of the messages (en or zh)")
    check.add_parser(sub, _lang)
    for extra in _EXTRA_COMMANDS:
        extra.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code (EXIT_*). A closed output pipe ends it quietly."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # inside the try: a pipe closed early is reported here, not at exit
        return code
    except BrokenPipeError:
        try:  # Python would report the pipe again when it flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_PIPE


def entry() -> None:
    """The installed `attention-by-hand` command."""
    sys.exit(main())


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "list":
            for kind_id, kind in engine.KINDS.items():
                print(f"{kind_id:<20} levels {','.join(map(str, kind.LEVELS)):<6} {t(f'kind.{kind_id}.title')}")
            return EXIT_RIGHT
        if args.command == "generate":
            try:
                ex = engine.generate(args.kind, args.seed, args.level)
            except ValueError as err:
                raise CliError(str(err)) from None
            if args.json:
                print(json.dumps(ex.to_dict() if args.key else student_dict(ex), indent=2, ensure_ascii=False))
            else:
                print(describe(ex, args.lang) + (_key_text(ex, args.lang) if args.key else ""))
            return EXIT_RIGHT
        if args.command == "grade":
            ex = _load_exercise(args.file)
            try:
                fb = grading.grade(ex, _parse_answer_arg(args.answer))
            except AnswerError as err:
                raise MalformedAnswer(str(err)) from None
            print(json.dumps(_feedback_json(fb, args.lang), indent=2, ensure_ascii=False) if args.json
                  else _feedback_text(fb, args.lang))
            sys.stdout.flush()
            if not fb.graded:
                return EXIT_MALFORMED
            return EXIT_RIGHT if fb.correct else EXIT_WRONG
        if args.command == check.NAME:  # Check my work from a file of the learner's steps
            data = bounded_json(_read_bounded(args.file), f"{args.file!r}", 'write {"topic": …, "steps": {…}}')
            problem = check.problem(data, args.file)
            if problem:
                raise CliError(problem)
            return check.run(data, args.json, args.lang)
        for extra in _EXTRA_COMMANDS:
            if args.command == extra.NAME:
                return extra.run(args)
    except MalformedAnswer as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_MALFORMED
    except CliError as err:
        print("error: " + " ".join(str(err).splitlines()), file=sys.stderr)  # one line, whatever a file held
        return EXIT_USAGE
    return EXIT_USAGE


def _key_text(ex: Exercise, lang: str) -> str:
    lines = ["", "answers:"]
    for part in ex.parts:
        if part.is_choice:
            lines.append(f"{part.name} = {chr(ord('A') + int(part.reference[0, 0]))}")
        else:
            lines += [f"{part.name} =", _matrix_text(np.round(part.reference, max(part.decimals, 0)))]
    return "\n".join(lines)


# further sub-commands (worksheet …) register modules with NAME, add_parser(sub) and run(args)
_EXTRA_COMMANDS: list[Any] = [worksheets]
