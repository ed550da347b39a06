"""Practice on paper: "print this problem" hands out a one-problem PDF (the worksheet machinery,
Typst in a child process), and "copy as LaTeX" shows the statement and given matrices as LaTeX source."""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

import exercises
from exercises import worksheets
from exercises.i18n import catalog
from exercises.worksheets.text import _latex_answer, latex_given
from tests.apptest_helpers import current_exercise, open_page

CASES = [("softmax", 1, 5, "en"), ("attention", 2, 7, "zh"), ("masking", 1, 3, "en")]


def opened(kind: str, level: int, seed: int, lang: str):
    at = open_page("app_pages/practice.py", {"kind": kind, "level": str(level), "seed": str(seed)}, lang=lang)
    assert not at.exception, [e.value for e in at.exception]
    ex = current_exercise(at)
    assert (ex.kind, ex.level, ex.seed) == (kind, level, seed)
    return at, ex


@pytest.fixture
def deferred(monkeypatch) -> dict[str, object]:
    """{file id: the callable a download button registered}: what the server runs when it is clicked
    (AppTest keeps no runtime between runs to ask afterwards)."""
    registered: dict[str, object] = {}
    real = MediaFileManager.add_deferred

    def add_deferred(self, data_callable, *args, **kwargs):
        file_id = real(self, data_callable, *args, **kwargs)
        registered[file_id] = data_callable
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", add_deferred)
    return registered


@pytest.mark.parametrize("kind, level, seed, lang", CASES)
def test_print_this_problem_hands_out_a_one_problem_pdf(kind, level, seed, lang, deferred):
    at, ex = opened(kind, level, seed, lang)
    [button] = [b for b in at.get("download_button") if b.proto.label == catalog(lang)["practice.print"]]
    data = deferred[button.proto.deferred_file_id]()
    assert data.startswith(b"%PDF"), (kind, level, seed, lang, data[:20])
    assert button.proto.deferred_file_id, "the PDF is made when clicked, not on every run"


@pytest.mark.parametrize("kind, level, seed, lang", CASES)
def test_copy_as_latex_holds_the_statement_and_every_given_matrix(kind, level, seed, lang):
    at, ex = opened(kind, level, seed, lang)
    assert catalog(lang)["practice.copy_latex"] in [e.label for e in at.expander]
    [source] = [c.value for c in at.code if c.proto.language == "latex"]
    p = worksheets.problem(ex, 1, lang)
    assert worksheets.tex_escape(p.prompt) in source, (kind, level, seed, lang)
    matrices = [g for g in p.given if g.kind == "matrix"]
    assert matrices, (kind, level, seed)
    for g in matrices:
        assert latex_given(g) in source, (kind, level, seed, lang, g.name)
        # the learner's copy reads back as the very matrix (the parser reads LaTeX)
        body = re.search(r"\\begin\{bmatrix\}.*?\\end\{bmatrix\}", latex_given(g)).group()
        np.testing.assert_allclose(exercises.parse_answer(body), g.value, rtol=1e-12,
                                   err_msg=f"{kind} level {level} seed {seed}: {g.name}")
    for part in ex.parts:  # no answers in the copy
        if not part.is_choice:
            assert _latex_answer(part) not in source, (kind, level, seed, lang, part.name)
