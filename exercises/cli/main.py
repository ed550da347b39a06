"""python -m exercises list | generate KIND --seed N --level L [--json] | grade FILE|- ANSWER [--json]"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from .. import worksheets
from ..core import engine, grading
from ..core.model import Exercise
from ..core.parser import AnswerError
from ..i18n import Msg, t
from . import selftest


class CliError(Exception):
    """A problem with what was asked on the command line: printed, exit status 2."""


def _matrix_text(value: np.ndarray, indent: str = "    ") -> str:
    cells = [[selftest.format_cell(x) if np.isfinite(x) or np.isneginf(x) else str(x) for x in row]
             for row in np.atleast_2d(value)]
    width = max(len(c) for row in cells for c in row)
    return "\n".join(indent + "  ".join(c.rjust(width) for c in row) for row in cells)


def describe(ex: Exercise, lang: str = "en") -> str:
    """A plain-text statement of the exercise."""
    lines = [f"{t(f'kind.{ex.kind}.title', lang)}  (kind {ex.kind}, level {ex.level}, seed {ex.seed})",
             t(f"kind.{ex.kind}.prompt", lang, **ex.params)]
    policy = grading.rounding_policy(ex, lang)
    lines += [policy, ""] if policy else [""]
    for name, value in ex.given.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            lines += [f"{name} =", _matrix_text(value)]
        else:
            lines.append(f"{name} = {value}")
    lines.append("")
    for part in ex.parts:
        lines.append(f"find {part.name}: {part.shape[0]}×{part.shape[1]}"
                     + ("" if part.decimals == 0 else f", to {part.decimals} decimals"))
    return "\n".join(lines)


def _load_exercise(source: str) -> Exercise:
    try:
        text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
    except OSError as err:
        raise CliError(f"cannot read the exercise file {source!r}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise CliError(f"{source!r} is not a text file (not UTF-8); "
                       "make one with `python -m exercises generate KIND --json`") from None
    try:
        ex = Exercise.from_dict(json.loads(text))
    except json.JSONDecodeError as err:
        raise CliError(f"{source!r} is not JSON (line {err.lineno}, column {err.colno}: {err.msg}); "
                       "make one with `python -m exercises generate KIND --json`") from None
    except (KeyError, TypeError, ValueError) as err:
        raise CliError(f"{source!r} is not an exercise ({err}); "
                       "make one with `python -m exercises generate KIND --json`") from None
    for name, value in ex.given.items():
        numeric = isinstance(value, np.ndarray) and value.dtype.kind in "if"
        if not (numeric or isinstance(value, (int, float, bool))):
            raise CliError(f"{source!r}: the given value {name!r} is not a number, a flag or a matrix of numbers")
    return ex


def _parse_answer_arg(text: str) -> Any:
    """A JSON object {part: answer} for several parts, else the text of a one-part answer."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            answer = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise CliError(f"the answer looks like JSON but is not (character {err.pos + 1}: {err.msg})") from None
        if not isinstance(answer, dict):
            raise CliError("a JSON answer must be an object {part name: answer}")
        return answer
    return text


def _feedback_json(fb: grading.Feedback) -> dict[str, Any]:
    def text(m: Msg | None) -> str | None:
        return str(m) if m is not None else None
    return {
        "score": fb.score, "correct": fb.correct, "graded": fb.graded,
        "misconception": fb.misconception, "message": text(fb.message),
        "warnings": [str(w) for w in fb.warnings],
        "parts": {name: {"score": p.score, "format_error": text(p.format_error),
                         "misconception": p.misconception,
                         "cells": p.status.tolist() if p.status is not None else None,
                         "cell_errors": [{"row": r + 1, "col": c + 1, "message": str(m)}
                                         for (r, c), m in p.cell_errors.items()]}
                  for name, p in fb.parts.items()},
    }


def _feedback_text(fb: grading.Feedback) -> str:
    lines = [str(fb.message)] if fb.message else []
    if fb.graded:
        lines.insert(0, f"score {fb.score:.3f}")
    for name, p in fb.parts.items():
        if p.format_error:
            lines.append(f"{name}: {p.format_error}")
        elif p.status is not None:
            marks = "\n".join("    " + " ".join({"right": "✓", "wrong": "✗", "consistent": "≈"}[s] for s in row)
                              for row in p.status)
            lines.append(f"{name}: {p.score:.3f}\n{marks}")
        if p.misconception:
            lines.append(f"  likely mistake: {t('misconception.' + p.misconception)}")
    lines += [f"warning: {w}" for w in fb.warnings]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exercises", description="Attention exercises by hand.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the exercise kinds and their levels")
    gen = sub.add_parser("generate", help="make one exercise")
    gen.add_argument("kind")
    gen.add_argument("--seed", default="0")
    gen.add_argument("--level", default="1")
    gen.add_argument("--json", action="store_true", help="print the exercise as JSON")
    grd = sub.add_parser("grade", help="grade an answer to an exercise saved as JSON")
    grd.add_argument("file", help="the exercise JSON file, or - for standard input")
    grd.add_argument("answer", help='matrix text such as "1 2; 3 4", or JSON {"part": "…"} for several parts')
    grd.add_argument("--json", action="store_true", help="print the feedback as JSON")
    for extra in _EXTRA_COMMANDS:
        extra.add_parser(sub)
    args = parser.parse_args(argv)

    try:
        if args.command == "list":
            for kind_id, kind in engine.KINDS.items():
                print(f"{kind_id:<20} levels {','.join(map(str, kind.LEVELS)):<6} {t(f'kind.{kind_id}.title')}")
            return 0
        if args.command == "generate":
            try:
                ex = engine.generate(args.kind, args.seed, args.level)
            except ValueError as err:
                raise CliError(str(err)) from None
            print(json.dumps(ex.to_dict(), indent=2, ensure_ascii=False) if args.json else describe(ex))
            return 0
        if args.command == "grade":
            ex = _load_exercise(args.file)
            try:
                fb = grading.grade(ex, _parse_answer_arg(args.answer))
            except AnswerError as err:
                raise CliError(str(err)) from None
            print(json.dumps(_feedback_json(fb), indent=2, ensure_ascii=False) if args.json else _feedback_text(fb))
            return 0 if fb.graded else 1
        for extra in _EXTRA_COMMANDS:
            if args.command == extra.NAME:
                return extra.run(args)
    except CliError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 2


# further sub-commands (worksheet …) register modules with NAME, add_parser(sub) and run(args)
_EXTRA_COMMANDS: list[Any] = [worksheets]
