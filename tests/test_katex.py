"""Every LaTeX string a solution, its cells, its aids and its given matrices can show renders in KaTeX.

KaTeX (the engine behind st.latex) runs under Node from tests/katex (`npm ci` there; .ci/run does it).
Under CI (the CI variable set) a missing node or katex module is a failure, not a skip.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Sequence

import pytest

import exercises
from exercises import solutions
from tests import generated
from tests.apptest_helpers import ROOT

KATEX_DIR = ROOT / "tests" / "katex"
SEEDS = range(4)


def _node() -> str:
    node = shutil.which("node")
    missing = None
    if node is None:
        missing = "node is not installed"
    elif not (KATEX_DIR / "node_modules" / "katex" / "package.json").is_file():
        missing = "the katex npm package is not installed (run `npm ci` in tests/katex)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"KaTeX check cannot run under CI: {missing}")
        pytest.skip(missing)
    return node


def katex_errors(items: Sequence[tuple[str, str]]) -> tuple[list[dict], dict]:
    """Render (id, latex) pairs in one Node process; return (failures, summary). A string shown in many places
    (e^{0} \\approx 1.000) is rendered once: its failure is reported for every id that shows it."""
    ids: dict[str, list[str]] = {}
    for ident, latex in items:
        ids.setdefault(latex, []).append(ident)
    lines = "\n".join(json.dumps({"id": index, "latex": latex}) for index, latex in enumerate(ids)) + "\n"
    run = subprocess.run([_node(), str(KATEX_DIR / "render.js")], input=lines, capture_output=True, text=True,
                         timeout=300, cwd=KATEX_DIR)
    records = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert records, f"the KaTeX renderer printed nothing (exit {run.returncode}): {run.stderr[-2000:]}"
    summary = records[-1]
    assert "checked" in summary, f"no summary line from the renderer: {run.stdout[-2000:]} {run.stderr[-2000:]}"
    assert summary["checked"] == len(ids), f"the renderer checked {summary['checked']} of {len(ids)} strings"
    shown = list(ids.values())
    failures = [{**record, "id": ident} for record in records[:-1] for ident in shown[record["id"]]]
    return failures, {**summary, "checked": len(items), "errors": len(failures)}


@functools.cache
def strings_for(kind: str) -> tuple[tuple[str, str], ...]:
    """Every string of every step, cell, aid and given matrix over all levels and a few seeds (made once per
    session: the KaTeX and the spacing tests read them)."""
    items = []
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            ex = generated.exercise(kind, seed, level)
            where = f"{kind} L{level} s{seed}"
            for step in exercises.solve(ex):
                items += [(f"{where} {step.name}", s) for s in step.latex_strings()]
            items += [(f"{where} aids", s) for s in exercises.aids(ex).latex_strings()]
            items += [(f"{where} given {name}", s) for name, s in solutions.given_latex(ex)]
    return tuple(items)


def test_renderer_reports_errors_and_accepts_good_latex():
    failures, summary = katex_errors([("good", r"\frac{e^{0}}{e^{0} + e^{1}}"), ("bad", r"\frac{1}{"),
                                      ("unknown", r"\notacommand{x}"), ("bad again", r"\frac{1}{")])
    assert summary["checked"] == 4 and summary["errors"] == 3
    assert sorted(f["id"] for f in failures) == ["bad", "bad again", "unknown"], "a repeated string fails for each"
    assert summary["katex"] == "0.16.47"  # the version Streamlit 1.67 bundles


@pytest.fixture(scope="module")
def failures_by_kind() -> dict[str, list[dict]]:
    """Every kind's strings rendered in one Node process (one start of KaTeX, not one per kind): {kind: its
    failures}."""
    items = [item for kind in exercises.KINDS for item in strings_for(kind)]
    failures, summary = katex_errors(items)
    assert summary["checked"] == len(items)
    owner = {ident: kind for kind in exercises.KINDS for ident, _ in strings_for(kind)}
    found: dict[str, list[dict]] = {kind: [] for kind in exercises.KINDS}
    for failure in failures:
        found[owner[failure["id"]]].append(failure)
    return found


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_every_solution_string_renders(failures_by_kind, kind):
    assert len(strings_for(kind)) > 10 * len(exercises.KINDS[kind].LEVELS)
    failures = failures_by_kind[kind]
    shown = "\n".join(f"{f['id']}: {f['error']}\n    {f['latex'][:300]}" for f in failures[:10])
    assert not failures, f"{len(failures)} strings do not render in KaTeX:\n{shown}"


def test_golden_example_renders():
    from tests.test_solutions import golden_exercise
    ex = golden_exercise()
    items = [(step.name, s) for step in exercises.solve(ex) for s in step.latex_strings()]
    items += [("aids", s) for s in exercises.aids(ex).latex_strings()]
    failures, _ = katex_errors(items)
    assert not failures, failures[:3]
