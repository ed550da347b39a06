"""Worksheets and answer keys: PDF through Typst (read back with poppler's pdftotext), Markdown, LaTeX, JSON."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exercises import worksheets
from exercises.cli import main as cli
from exercises.i18n import t
from exercises.teacher.assignments import AssignmentError, item_seed, make_spec, student_key

REPO_ROOT = Path(__file__).resolve().parent.parent
ITEMS = [{"kind": "softmax", "level": 2, "count": 2}, {"kind": "scores", "level": 2, "count": 1}]


def pdf_text(data: bytes, tmp_path: Path, name: str = "doc.pdf") -> str:
    """The text of a PDF as poppler reads it (Debian package poppler-utils)."""
    assert shutil.which("pdftotext"), "pdftotext is missing: install Debian's poppler-utils"
    path = tmp_path / name
    path.write_bytes(data)
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def tokens(text: str) -> set[str]:
    return set(re.split(r"[\s\[\]()=,]+", text.replace("\u2212", "-")))


def answer_tokens(ex) -> set[str]:
    """The non-whole reference values of an exercise as the key prints them (2 decimals)."""
    out = set()
    for part in ex.parts:
        for x in part.reference.ravel():
            if np.isfinite(x) and not float(x).is_integer():
                out.add(f"{x:.{worksheets.answer_places(part)}f}")
    return out


@pytest.fixture(scope="module")
def class_sheet():
    spec = make_spec("Week 3 — softmax", ITEMS, seed=3)
    ws = worksheets.build(spec, code="K7QMX2PD")
    return ws, worksheets.render(ws, "pdf")


def test_pdf_worksheet_shows_the_problems_and_the_key_the_answers(class_sheet, tmp_path):
    ws, files = class_sheet
    assert set(files) == {"worksheet.pdf", "answer-key.pdf"}
    assert all(data.startswith(b"%PDF-") for data in files.values())
    sheet = pdf_text(files["worksheet.pdf"], tmp_path, "w.pdf")
    key = pdf_text(files["answer-key.pdf"], tmp_path, "k.pdf")
    for text in (sheet, key):
        assert "Week 3 — softmax" in text and "K7QMX2PD" in text
        assert t("kind.softmax.title") in text and t("kind.scores.title") in text
        assert "Compute the score matrix S = Q Kᵀ." in text.replace("\n", " ")
    assert "Name:" in sheet and "Answer key" not in sheet and "Worked solution" not in sheet
    assert "Values of eˣ you may need:" in sheet
    assert "Answer key" in key and key.count("Worked solution") == 3
    softmax = ws.sheets[0].exercises[0]
    assert answer_tokens(softmax) and answer_tokens(softmax) <= tokens(key)
    assert not answer_tokens(softmax) <= tokens(sheet)  # the worksheet does not carry the answers
    scores = ws.sheets[0].exercises[2].part("scores").reference
    assert {str(int(x)) for x in scores.ravel()} <= tokens(key)


def test_same_assignment_gives_byte_identical_documents(class_sheet, tmp_path):
    ws, files = class_sheet
    again = worksheets.build(make_spec("Week 3 — softmax", ITEMS, seed=3), code="K7QMX2PD")
    assert worksheets.render(again, "pdf") == files
    for fmt in ("md", "tex", "json"):
        assert worksheets.render(again, fmt) == worksheets.render(ws, fmt)
    # and in another process, through the command line
    out = tmp_path / "cli"
    subprocess.run([sys.executable, "-m", "exercises", "worksheet", "--kinds", "softmax,scores", "--level", "2",
                    "--count", "4", "--seed", "3", "--format", "pdf", "--out", str(out)], cwd=REPO_ROOT, check=True,
                   capture_output=True)
    spec = make_spec(t("worksheet.default_title"), [{"kind": k, "level": 2, "count": 4} for k in ("softmax", "scores")], 3)
    assert (out / "worksheet.pdf").read_bytes() == worksheets.to_pdf(worksheets.build(spec))
    assert (out / "answer-key.pdf").read_bytes() == worksheets.to_pdf(worksheets.build(spec), key=True)


def test_per_student_variants_differ_between_students_and_stay_put_per_student(tmp_path):
    spec = make_spec("Quiz", ITEMS, seed=11, per_student=True)
    names = ["Ada Lovelace", "Alan Turing", "Grace Hopper"]
    ws = worksheets.build(spec, names)
    assert [s.student for s in ws.sheets] == names
    given = [[ex.to_dict()["given"] for ex in sheet.exercises] for sheet in ws.sheets]
    assert given[0] != given[1] and given[1] != given[2] and given[0] != given[2]
    # the same student gets the same variant, whoever else is in the class and however the name is typed
    alone = worksheets.build(spec, ["  alan   TURING "]).sheets[0].exercises
    assert [ex.to_dict() for ex in alone] == [ex.to_dict() for ex in ws.sheets[1].exercises]
    assert item_seed(11, 0, "Alan Turing") == item_seed(11, 0, "alan turing") != item_seed(11, 0, "Ada Lovelace")
    assert item_seed(11, 0, "Ada") != item_seed(11, 1, "Ada") != item_seed(12, 1, "Ada")
    # pinned: the seed derivation is part of every stored assignment, it must never drift
    assert item_seed(3, 0) == item_seed(3, 0, None) == 2158667574896057
    assert item_seed(11, 2, "Ada Lovelace") == 8953374849862091
    assert student_key("Ｇｒａｃｅ  Hopper") == "grace hopper"

    files = worksheets.render(ws, "pdf")
    sheet = pdf_text(files["worksheet.pdf"], tmp_path, "w.pdf")
    key = pdf_text(files["answer-key.pdf"], tmp_path, "k.pdf")
    for name in names:
        assert f"Student: {name}" in sheet and f"Student: {name}" in key
    assert sheet.count("\f") >= 3  # at least a page per student
    for sheet_ in ws.sheets:
        assert answer_tokens(sheet_.exercises[0]) <= tokens(key)  # the key lists every student's answers


def test_bad_student_lists_are_rejected():
    spec = make_spec("Quiz", ITEMS, seed=1, per_student=True)
    for students, key in [([], "worksheet.error.no_students"), (["Ada", "ADA "], "worksheet.error.duplicate_student"),
                          (["Ada", "a\tb"], "assignment.error.name_chars"), (["x" * 81], "assignment.error.name_long")]:
        with pytest.raises(AssignmentError) as info:
            worksheets.build(spec, students)
        assert info.value.message.key == key


def test_user_text_stays_text_in_every_format(tmp_path):
    title = 'Week #1 $x$ {a}_b 50% & "quoted" \\ ] #set page(fill: red) <x> *bold*'
    spec = make_spec(title, ITEMS[:1], seed=2, per_student=True)
    ws = worksheets.build(spec, ['Ann "#strong[x]" \\'])
    text = pdf_text(worksheets.to_pdf(ws), tmp_path)
    assert title in text.replace("\n", " ")
    assert 'Student: Ann "#strong[x]" \\' in text
    tex = worksheets.to_latex(ws)
    assert r"Week \#1 \$x\$ \{a\}\_b 50\% \& " in tex and tex.startswith("% compile with lualatex")
    md = worksheets.to_markdown(ws)
    assert r"Week \#1 \$x\$ \{a\}\_b 50% & " in md and r"\*bold\*" in md
    assert json.loads(worksheets.to_json(ws))["title"] == title


def test_markdown_latex_and_json_carry_the_same_problems(class_sheet):
    ws, _ = class_sheet
    md, md_key = worksheets.to_markdown(ws), worksheets.to_markdown(ws, key=True)
    tex, tex_key = worksheets.to_latex(ws), worksheets.to_latex(ws, key=True)
    for text in (md, md_key, tex, tex_key):
        assert text.count("Row-wise softmax") == 2 and "Scores Q Kᵀ" in text
    assert "Worked solution" in md_key and "Worked solution" not in md
    assert "\\begin{document}" in tex and tex_key.rstrip().endswith("\\end{document}")
    assert tex_key.count("\\paragraph{Worked solution}") == 3
    softmax = ws.sheets[0].exercises[0]
    first = softmax.part("A").reference[1]
    row = " & ".join(f"{x:.2f}" if not float(x).is_integer() else str(int(x)) for x in first)
    assert row in md_key and row not in md
    sheet, key = json.loads(worksheets.to_json(ws)), json.loads(worksheets.to_json(ws, key=True))
    problem = sheet["sheets"][0]["problems"][0]
    assert problem["kind"] == "softmax" and "seed" not in problem and "reference" not in problem["parts"][0]
    assert problem["exp_table"] and sheet["document"] == "worksheet"
    solved = key["sheets"][0]["problems"][0]
    assert solved["seed"] == softmax.seed and np.allclose(solved["parts"][0]["reference"], softmax.part("A").reference)
    assert solved["solution"][0]["latex"] and key["assignment"]["seed"] == 3


def test_cli_writes_each_format_and_reads_a_student_list(tmp_path, capsys):
    names = tmp_path / "names.txt"
    names.write_text("# class 7b\nAda Lovelace\n\nAlan Turing\n", encoding="utf-8")
    for fmt in ("md", "tex", "json"):
        out = tmp_path / fmt
        assert cli.main(["worksheet", "--kinds", "softmax", "--level", "1", "--count", "2", "--seed", "5",
                         "--format", fmt, "--out", str(out), "--students", str(names)]) == 0
        assert sorted(p.name for p in out.iterdir()) == [f"answer-key.{fmt}", f"worksheet.{fmt}"]
        assert "Alan Turing" in (out / f"worksheet.{fmt}").read_text(encoding="utf-8")
    capsys.readouterr()
    for argv, needle in [(["--kinds", "nope"], "Unknown topic 'nope'"), (["--kinds", "softmax", "--level", "9"], "levels"),
                         (["--kinds", "softmax", "--format", "docx"], "unknown format"),
                         (["--kinds", "softmax", "--count", "x"], "whole numbers"),
                         (["--kinds", "softmax", "--students", str(tmp_path / "missing.txt")], "cannot read")]:
        assert cli.main(["worksheet", "--out", str(tmp_path / "bad"), *argv]) == 2
        assert needle in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("kind", ["attention", "backprop", "grad_embedding", "multi_head", "concepts", "shapes", "variance"])
def test_every_kind_compiles(kind, tmp_path):
    import exercises

    if kind not in exercises.KINDS:
        pytest.fail(f"kind {kind} is missing")
    level = exercises.KINDS[kind].LEVELS[0]
    ws = worksheets.build(make_spec("All kinds", [{"kind": kind, "level": level, "count": 1}], seed=4))
    key = pdf_text(worksheets.to_pdf(ws, key=True), tmp_path)
    assert t(f"kind.{kind}.title") in key


def test_chinese_worksheets_use_a_cjk_font(tmp_path, monkeypatch):
    spec = make_spec("第三周：softmax", ITEMS[:1], seed=3, per_student=True)
    ws = worksheets.build(spec, ["张伟"], lang="zh")
    assert worksheets.cjk_font_dir() is not None, "no CJK font: install Debian's fonts-wqy-microhei"
    text = pdf_text(worksheets.to_pdf(ws), tmp_path)
    assert spec.title == "第三周:softmax" and spec.title in text and "张伟" in text  # titles are NFKC-normalised
    assert t("kind.softmax.prompt", "zh").split("：")[0] in text
    assert worksheets.to_pdf(ws) == worksheets.to_pdf(ws)  # deterministic with the CJK font too
    monkeypatch.setenv(worksheets.CJK_FONT_ENV, str(tmp_path / "no-fonts-here"))
    with pytest.raises(worksheets.MissingFont, match="fonts-wqy-microhei"):
        worksheets.to_pdf(ws)
    english = worksheets.build(make_spec("Week 3", ITEMS[:1], seed=3))
    assert worksheets.to_pdf(english).startswith(b"%PDF")  # Latin text never needs it


def _key_titles(markdown: str) -> list[list[str]]:
    """The worked-solution step titles of each problem of a Markdown answer key, in order."""
    problems: list[list[str]] = []
    inside = False
    for line in markdown.splitlines():
        if line.startswith("## "):
            problems.append([])
            inside = False
        elif line == f"**{t('worksheet.solution')}**":
            inside = True
        elif inside and (found := re.fullmatch(r"\*(\d+)\. (.*)\*", line)):
            assert int(found.group(1)) == len(problems[-1]) + 1
            problems[-1].append(found.group(2))
    return problems


@pytest.mark.parametrize("kind", sorted(__import__("exercises").KINDS))
def test_every_key_shows_the_steps_of_the_screen(kind):
    """The answer key, in every format, has exercises.solve's steps: the same, in order, same titles."""
    import exercises

    for level in exercises.KINDS[kind].LEVELS:
        ws = worksheets.build(make_spec("Key", [{"kind": kind, "level": level, "count": 2}], seed=level))
        problems = list(ws.sheets[0].exercises)
        solved = [exercises.solve(ex) for ex in problems]
        titles = [[worksheets.md_escape(s.title.render("en")) for s in steps] for steps in solved]
        assert _key_titles(worksheets.to_markdown(ws, key=True)) == titles
        typst_source = worksheets.to_typst(ws, key=True)
        heads = re.findall(r'#step-head\("(\d+\. [^"]*)"\)', typst_source)
        assert heads == [f"{n}. {s.title.render('en')}".replace('"', '\\"') for steps in solved
                         for n, s in enumerate(steps, start=1)]
        # every step's derivation is the screen's own LaTeX set in Typst, none falls back to a bare result
        for ex, steps in zip(problems, solved):
            for s in steps:
                if not ex.part_names or s.name not in ex.part_names or not ex.part(s.name).is_choice:
                    assert worksheets.latex_to_typst(s.display(exact=True)) in typst_source


def test_the_grad_softmax_key_shows_the_jacobian_and_the_finite_difference(tmp_path):
    import exercises

    ws = worksheets.build(make_spec("Key", [{"kind": "grad_softmax", "level": 2, "count": 1}], seed=1))
    ex = ws.sheets[0].exercises[0]
    key = pdf_text(worksheets.to_pdf(ws, key=True), tmp_path).replace("\n", " ")
    for step in exercises.solve(ex):
        assert step.title.render("en") in key
    assert "diag" in key and "0.002" in key  # J = diag(a) − aᵀa, and the finite difference over 2h = 0.002
    md = worksheets.to_markdown(ws, key=True)
    assert r"\operatorname{diag}" in md and "10^{-3}" in md


def test_latex_becomes_typst_math():
    convert = worksheets.latex_to_typst
    assert convert(r"\frac{e^{1}}{e^{0} + e^{1}} \approx 0.73") == "frac(e^1, e^0 + e^1) approx 0.73"
    assert convert(r"S_{12} = q_{1} \cdot k_{2}") == "S_12 = q_1 dot k_2"
    assert convert(r"\tilde{Z}_{ij}") == "tilde(Z)_(i j)"
    assert convert(r"\begin{bmatrix} 1 & \displaystyle \frac{1}{2} \\ -\infty & 0 \end{bmatrix}") == \
        'mat(delim: "[", 1, display(frac(1, 2)); - infinity, 0)'
    assert convert(r"\begin{aligned} a &= b \\ &\approx c \end{aligned}") == r"a & = b \  & approx c"
    assert convert(r"\left(1, 2\right)") == r"lr((1 \, 2))"
    assert convert(r"\operatorname{shape}(Q) = (\text{rows}, \text{columns})") == \
        r'op("shape") ( Q ) = ( "rows" \, "columns" )'
    assert convert(r"\sum_{p:\, t_p = v} (G_X)_{p}") == "sum_(p : thin t_p = v) ( G_X )_p"
    with pytest.raises(worksheets.UnsupportedLatex):
        convert(r"\begin{array}{c} 1 \end{array}")
    with pytest.raises(worksheets.UnsupportedLatex):
        convert(r"\unknowncommand")


def test_key_lines_not_shrunk_fit_the_page():
    """Only lines wider than FIT_WIDTH are measured and shrunk: every narrower one fits an A4 line."""
    import typst

    import exercises
    from exercises.worksheets import typst as typst_pdf

    lines = []
    for kind in exercises.KINDS:
        for level in exercises.KINDS[kind].LEVELS:
            for s in worksheets.solution_steps(exercises.generate(kind, 0, level), "en"):
                lines += [m for m in (worksheets.latex_to_typst(x) for x in (s.latex, s.cell) if x)
                          if m.width <= typst_pdf.FIT_WIDTH]
    source = ('#set page(paper: "a4", margin: (x: 2cm, y: 1.8cm))\n#set text(font: "Libertinus Serif", size: 11pt)\n'
              + "\n".join(f"#context [#metadata(measure($ {m} $).width.pt()) <w>]" for m in lines))
    widths = json.loads(typst.query(source.encode(), "<w>", field="value"))
    text_width = (210 - 2 * 20) / 25.4 * 72  # pt
    assert len(widths) == len(lines) > 300
    assert max(widths) < text_width


# ---------------------------------------------------------------- the sheet reads right on paper

A4_BOTTOM_MARGIN_PT = 2.8 / 2.54 * 72  # the preamble's page margin at the bottom
WORKING_PT = 4 / 2.54 * 72  # SPACE_HEIGHTS["some"]


def _working_labels(pdf: bytes, tmp_path: Path) -> list[tuple[int, float, float]]:
    """(page, top of the word "Working", page height) for every working box's label, as poppler reads it."""
    path = tmp_path / "boxes.pdf"
    path.write_bytes(pdf)
    html = subprocess.run(["pdftotext", "-bbox", str(path), "-"], capture_output=True, text=True, check=True).stdout
    found = []
    for number, (height, body) in enumerate(re.findall(r'<page width="[\d.]+" height="([\d.]+)">(.*?)</page>',
                                                       html, re.S), start=1):
        for top in re.findall(r'<word xMin="[\d.]+" yMin="([\d.]+)"[^>]*>Working</word>', body):
            found.append((number, float(top), float(height)))
    return found


def test_an_items_working_box_is_never_split_across_pages(tmp_path):
    """Page 6 started with an empty dashed box: the rest of the working box of an item on page 5."""
    kinds = ("softmax", "scores", "masking", "attention", "scaling", "weighted_sum", "padding_mask")
    ws = worksheets.build(make_spec("Boxes", [{"kind": k, "level": 2, "count": 1} for k in kinds], seed=0),
                          code="K7QMX2PD")
    boxes = _working_labels(worksheets.render(ws, "pdf")["worksheet.pdf"], tmp_path)
    assert len(boxes) == len(kinds)
    for n, (page, top, height) in enumerate(boxes, start=1):
        bottom = top - 6 + WORKING_PT  # the label sits an inset below the box's top edge
        assert bottom <= height - A4_BOTTOM_MARGIN_PT + 1, \
            f"item {n} ({kinds[n - 1]}, level 2, seed 0): its working box runs past the foot of page {page}"


def test_the_padding_flags_have_one_name_on_the_sheet_and_in_the_question():
    """The flags were "pad" on the sheet and "p" in the question."""
    ws = worksheets.build(make_spec("Pad", [{"kind": "padding_mask", "level": 1, "count": 1}], seed=1))
    source = worksheets.to_typst(ws)
    assert "the flags p = [" in source and re.search(r"\bp = mat\(", source), "padding_mask level 1 seed 1"
    assert '"pad"' not in source, "padding_mask level 1 seed 1: the flags are named pad on the sheet"
    assert re.search(r"\bp = ", worksheets.to_markdown(ws)), "the Markdown sheet names them p too"


@pytest.mark.parametrize("lang, said", [("en", "and −∞ in a hidden (masked) cell"), ("zh", "被遮蔽的格子写 −∞")])
def test_a_part_holding_minus_infinity_does_not_ask_for_whole_numbers_only(lang, said):
    """"exact whole numbers" was asked for an answer holding −∞."""
    from exercises.worksheets import problem

    for kind, level in (("masking", 1), ("padding_mask", 1)):
        ex = worksheets.build(make_spec("Inf", [{"kind": kind, "level": level, "count": 1}], seed=2)).sheets[0].exercises[0]
        for part, words in problem(ex, 1, lang).asks:
            if np.isneginf(part.reference).any() and not part.is_choice:
                assert said in words, f"{kind} level {level} seed 2 part {part.name} ({lang}): {words!r}"
    ex = worksheets.build(make_spec("Whole", [{"kind": "scores", "level": 1, "count": 1}], seed=2)).sheets[0].exercises[0]
    (_, words), = problem(ex, 1, lang).asks
    assert "−∞" not in words, f"scores level 1 seed 2 ({lang}): no −∞ where there is none"


@pytest.mark.parametrize("lang, word", [("en", "Which value is the answer"), ("zh", "答案是哪个值")])
def test_the_key_says_which_value_to_write_when_the_rounded_work_ends_a_digit_off(lang, word):
    """The key printed "= −1.12" and then "O ≈ −1.11" with no word on which to use."""
    ws = worksheets.build(make_spec("Key", [{"kind": "attention", "level": 2, "count": 1}], seed=1), lang=lang)
    source = worksheets.to_typst(ws, key=True)
    lines = source.splitlines()
    step = next(n for n, line in enumerate(lines) if line.startswith("$ O & = A V"))
    assert "- 1.12" in lines[step] and "- 1.11" in lines[step], "attention level 2 seed 1: the case itself"
    assert word in lines[step + 2], f"attention level 2 seed 1 ({lang}): no word on which value to use"
    answer = next(line for line in lines if line.startswith("$ O = mat("))
    assert "-1.11" in answer, "the key's answer is the value the note points to"
    assert source.count(word) == 1, "only where the two differ"
    assert word in worksheets.to_markdown(ws, key=True)
