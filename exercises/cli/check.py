"""python -m exercises check FILE.json: Check my work from a file of the learner's own steps.

    {"topic": "gqa",
     "given": {"X": "1 0; 1 2", "W_Q1": [[1], [0]], …, "groups": 2, "causal": true},
     "steps": {"O1": "…", "concat": "…"},
     "stated": {"layers": 12, "heads": 8, "d_head": 64}}      # kv_cache's model, where a topic asks one

Values are matrix text in any format Practice reads (LaTeX bmatrix included) or JSON numbers. Exit codes:
0 every step right, 1 a step is wrong (the first one is named), 2 bad input (not JSON, an unknown topic,
a box that cannot be read, nothing to check). JSON only: YAML would need a dependency the project does
not have (convert with any YAML tool: `yq -o=json`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from ..core import checkwork
from ..i18n import Msg, msg, t

NAME = "check"
MARKS = {"right": "✓", "wrong": "✗", "consistent": "≈"}


def add_parser(sub: Any, lang_type: Any) -> None:
    p = sub.add_parser(NAME, help="check your own hand calculation step by step (a JSON file)",
                       description="Find the first wrong step of your own hand calculation. "
                                   'The file: {"topic": …, "given": {…}, "steps": {…}, "stated": {…}}.')
    p.add_argument("file", help="the JSON file of your steps, or - for standard input")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--lang", type=lang_type, default="en", help="language of the messages (en or zh)")


def problem(data: Any, source: str) -> str | None:
    """What is wrong with the file's JSON as a request (one line), or None."""
    hint = 'write {"topic": …, "given": {…}, "steps": {…}}'
    if not isinstance(data, dict):
        return f"{source!r} must hold a JSON object; {hint}"
    unknown = sorted(set(data) - {"topic", "given", "steps", "stated"})
    if unknown:
        return f"{source!r}: unknown field {unknown[0]!r}; the fields are topic, given, steps, stated"
    for field in ("given", "steps", "stated"):
        if not isinstance(data.get(field, {}), dict):
            return f"{source!r}: {field!r} must be an object {{name: value}}"
    if not isinstance(data.get("topic"), str):
        return f"{source!r}: 'topic' must name a topic: {', '.join(checkwork.topic_ids())}"
    return None


def run(data: dict[str, Any], as_json: bool, lang: str) -> int:
    """Check the request, print the report; the exit code (0 all right, 1 a wrong step, 2 bad input)."""
    topic, given, steps, stated = data["topic"], data.get("given", {}), data.get("steps", {}), data.get("stated", {})
    report = checkwork.check(topic, given, steps, stated)
    if not report.ok and not as_json:
        print("error: " + " ".join(m.render(lang) for m in report.errors).replace("\n", " "), file=sys.stderr)
        return 2
    fits = checkwork.fits(topic, given, steps, stated) if report.ok and not report.all_right else []
    print(json.dumps(report_json(report, fits, lang), indent=2, ensure_ascii=False) if as_json
          else report_text(report, fits, lang))
    if not report.ok or report.claim_errors or not report.steps:
        return 2
    return 0 if report.all_right else 1


def _cells(M: np.ndarray) -> list:
    return [[None if np.isnan(x) else ("-inf" if np.isneginf(x) else "inf" if np.isposinf(x) else float(x))
             for x in row] for row in np.atleast_2d(M)]


def report_json(report: checkwork.Report, fits: list, lang: str) -> dict[str, Any]:
    return {
        "ok": report.ok, "all_right": report.all_right, "first_error": report.first_error,
        "likely_mistake": report.likely_mistake, "messages": [m.render(lang) for m in report.summary()],
        "steps": {name: {"verdict": s.verdict, "decimals": s.decimals, "cells": s.status.tolist(),
                         "mistake": s.mistake, "yours": _cells(s.value), "correct": _cells(s.true)}
                  for name, s in report.steps.items()},
        "unread": {name: m.render(lang) for name, m in report.claim_errors.items()},
        "correct": {name: _cells(v) for name, v in report.reference.items()},
        "fits": [[m.render(lang) for m in labels] for labels in fits],
    }


def report_text(report: checkwork.Report, fits: list, lang: str) -> str:
    lines = [m.render(lang) for m in report.summary()]
    for name, s in report.steps.items():
        marks = "\n".join("    " + " ".join(MARKS[x] for x in row) for row in s.status)
        lines.append(f"{name}: {t('checkwork.verdict.' + s.verdict, lang)}\n{marks}")
        if s.mistake:
            lines.append("  " + Msg(f"misconception.{s.mistake}").render(lang))
    lines += [f"{name}: {m.render(lang)}" for name, m in report.claim_errors.items()]
    for labels in fits:
        lines.append(msg("checkwork.fits", labels=", ".join(m.render(lang) for m in labels)).render(lang))
    return "\n".join(lines)
