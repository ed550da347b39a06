"""Printed sheets that keep items whole, built one sheet at a time to disk, and Moodle XML."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pytest

import exercises
from exercises import worksheets
from exercises.core import grading
from exercises.core.numbers import round_half_up
from exercises.teacher.assignments import make_spec
from exercises.worksheets import moodle
from tests.test_worksheets import pdf_text

MIXED = [{"kind": "softmax", "level": 2, "count": 1}, {"kind": "masking", "level": 2, "count": 1},
         {"kind": "concepts", "level": 1, "count": 1}, {"kind": "attention", "level": 1, "count": 1},
         {"kind": "scores", "level": 2, "count": 1}]


# ---------------------------------------------------------------- layout, read back from the PDFs


def _pages(data: bytes, tmp_path) -> list[str]:
    return [" ".join(p.split()) for p in pdf_text(data, tmp_path).split("\f")]


def test_an_item_and_its_heading_never_split_across_pages(tmp_path):
    """Items shorter than a page (a taller one breaks between parts): before, this set split one
    worksheet item and four key items across pages."""
    items = [{"kind": "softmax", "level": 2, "count": 4}, {"kind": "masking", "level": 2, "count": 4},
             {"kind": "scores", "level": 2, "count": 4}, {"kind": "scaling", "level": 2, "count": 4}]
    ws = worksheets.build(make_spec("Layout", items, seed=7), code="K7QMX2PD")
    for key in (False, True):
        pages = _pages(worksheets.to_pdf(ws, key), tmp_path)
        assert len(pages) > 5
        for number, ex in enumerate(ws.sheets[0].exercises, start=1):
            p = worksheets.problem(ex, number, "en")
            heading = f"{number}. {p.title}"
            where = [i for i, page in enumerate(pages) if heading in page]
            assert len(where) == 1, heading
            for _part, words in p.asks:  # every part asked, with its boxes or answer, on the heading's page
                assert " ".join(words.split()) in pages[where[0]], (key, heading, words)


def test_the_footer_has_code_student_page_and_the_students_qr(tmp_path):
    import dataclasses

    spec = make_spec("QR", [{"kind": "scores", "level": 1, "count": 1}], seed=2, per_student=True)
    ws = worksheets.build(spec, ["Ada Lovelace", "Alan Turing"], code="K7QMX2PD")
    link = "https://school.example/assignments?assignment=K7QMX2PD&t=abc123"
    ws = dataclasses.replace(ws, links=(("Ada Lovelace", link),))
    pages = _pages(worksheets.to_pdf(ws), tmp_path)
    assert "Code K7QMX2PD · Ada Lovelace · page 1" in pages[0]
    assert "Code K7QMX2PD · Alan Turing · page 1" in pages[1]
    source = worksheets.to_typst(ws)
    # one QR for every page of her sheet (a paper sheet has one per page: tests/test_paper.py)
    assert f"#sheet-qr.update(({worksheets.typst_string(worksheets.typst.qr_svg(link))},))" in source
    assert source.count('#sheet-qr.update(("<svg') == 1  # Ada's sheet only: Alan has no personal link
    import segno

    assert segno.make(link, error="m").designator  # the library that draws it


def test_working_space_and_answer_cells_that_fit(tmp_path):
    import dataclasses

    ws = worksheets.build(make_spec("Space", [{"kind": "softmax", "level": 2, "count": 1}], seed=1))
    none, lots = (worksheets.to_typst(dataclasses.replace(ws, space=s)) for s in ("none", "lots"))
    assert "#working(" not in none and "#working(9cm" in lots
    assert "answer-grid(3, 3, 2.20cm)" in none  # 22 mm cells: −0.75 in handwriting fits
    assert "Working" in pdf_text(worksheets.to_pdf(dataclasses.replace(ws, space="some")), tmp_path)


def test_the_mask_formula_keeps_its_gap_and_the_concepts_key_reads_right(tmp_path):
    ws = worksheets.build(make_spec("Key", [{"kind": "masking", "level": 2, "count": 1},
                                            {"kind": "concepts", "level": 1, "count": 1}], seed=1))
    key = pdf_text(worksheets.to_pdf(ws, key=True), tmp_path)
    assert "−∞𝑗" not in key and "𝑗>𝑖" in key.replace(" ", "")  # was "−∞j > i": the gap of the cases was missing
    assert "masked_count" not in key  # the internal name
    concepts = ws.sheets[0].exercises[1]
    choices = [p for p in concepts.parts if p.is_choice]
    assert key.count("Answer: option") == len(choices)  # once each, not twice


# ---------------------------------------------------------------- bounded: one sheet at a time, to disk


def test_a_class_zip_holds_each_students_pdfs_and_reports_progress(tmp_path):
    spec = make_spec("Class", [{"kind": "scores", "level": 1, "count": 2}], seed=3, per_student=True)
    ws = worksheets.build(spec, ["Ada", "Alan Turing", "张伟"], code="K7QMX2PD")
    seen = []
    path = worksheets.write_pdf_zip(ws, tmp_path / "class.zip", lambda done, total: seen.append((done, total)))
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert names == ["worksheet-001-ada.pdf", "answer-key-001-ada.pdf", "worksheet-002-alan-turing.pdf",
                         "answer-key-002-alan-turing.pdf", "worksheet-003-张伟.pdf", "answer-key-003-张伟.pdf"]
        text = pdf_text(archive.read("worksheet-002-alan-turing.pdf"), tmp_path)
        assert "Student: Alan Turing" in text and "Ada" not in text
    assert seen[-1] == (6, 6) and len(seen) == 6


def _doc(text: str) -> str:
    return f"= {text}\n\nSome words for {text}."


def test_a_class_zip_is_compiled_by_two_children_that_only_import_typst(tmp_path, monkeypatch):
    """Both cores: two compiler children at once (before, one), each a bare Python with typst only
    (before, a multiprocessing child that imported the parent's main module and with it the engine)."""
    from exercises.worksheets import files

    made = []

    class Recording(files.Compiler):
        def __init__(self, children: int = 1) -> None:
            made.append(children)
            super().__init__(children)

    monkeypatch.setattr(files, "Compiler", Recording)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert files.compilers() == 2
    spec = make_spec("Class", [{"kind": "scores", "level": 1, "count": 1}], seed=3, per_student=True)
    ws = worksheets.build(spec, ["Ada", "Alan", "Grace"], code="K7QMX2PD")
    with zipfile.ZipFile(worksheets.write_pdf_zip(ws, tmp_path / "class.zip")) as archive:
        assert [archive.read(n)[:4] for n in archive.namelist()] == [b"%PDF"] * 6
    assert made == [2]
    compiler = files.Compiler(2)
    try:
        both = [compiler.submit(_doc("one")), compiler.submit(_doc("two"))]  # the first is still compiling
        assert len(set(compiler.pids())) == 2 and [f.result()[:4] for f in both] == [b"%PDF"] * 2
    finally:
        compiler.close()
    child = files._Child()
    try:
        import sys

        assert child.process.args[:2] == [sys.executable, "-c"]  # its own program, not the parent's main module
        assert "import typst" in child.process.args[2] and "exercises" not in child.process.args[2]
    finally:
        child.shutdown(wait=True)


def test_a_compiler_child_is_replaced_before_its_memory_would_pass_the_cap(monkeypatch):
    """Before, a child was replaced after 20 documents or 1.5 MB of source whatever they took: one
    student's 40-item level-3 key then grew it to 667 MiB. Now its resident size, read back after
    each document, plus GROWTH_PER_BYTE per byte sent since, stays under CHILD_MEMORY."""
    from exercises.worksheets import files

    compiler = files.Compiler(1)
    try:
        assert compiler.submit(_doc("one")).result()[:4] == b"%PDF"
        first = compiler.pids()
        child = compiler._children[0]
        assert child.measured[0] > 20 * 2**20 and child.measured[1] == child.sent  # read back from the child
        monkeypatch.setattr(files, "CHILD_MEMORY", child.estimate(len(_doc("two")) - 1) + 2 * 2**20)
        assert compiler.submit(_doc("two")).result()[:4] == b"%PDF"
        assert compiler.pids() == first  # room for it
        monkeypatch.setattr(files, "CHILD_MEMORY", child.measured[0])  # no room left: a fresh child
        assert compiler.submit(_doc("three")).result()[:4] == b"%PDF"
        assert compiler.pids() != first and child.process.poll() is not None  # the old one has ended
        monkeypatch.setattr(files, "CHILD_MEMORY", 2**40)  # room for anything, but …
        compiler._children[0].process.kill()  # … a child that died (killed, out of memory) …
        compiler._children[0].process.wait()
        assert compiler.submit(_doc("four")).result()[:4] == b"%PDF"  # … is replaced
    finally:
        compiler.close()
    assert compiler.pids() == []


def test_a_document_too_big_for_a_child_is_compiled_with_no_other_child_alive(monkeypatch):
    from exercises.worksheets import files

    compiler = files.Compiler(2)
    try:
        small = [compiler.submit(_doc("small one")), compiler.submit(_doc("small two"))]
        assert len(compiler.pids()) == 2  # side by side
        monkeypatch.setattr(files, "CHILD_MEMORY", files.CHILD_BASE + files.GROWTH_PER_BYTE * 50)
        big = compiler.submit(_doc("big " * 20))
        assert all(f.done() for f in small) and len(compiler.pids()) == 1
        assert big.result()[:4] == b"%PDF"
    finally:
        compiler.close()


def test_a_print_run_past_the_cap_gets_a_clear_message():
    from services import exports

    exports.check_size(200, 20)
    with pytest.raises(exercises.teacher.assignments.AssignmentError) as info:
        exports.check_size(201, 20)
    assert info.value.message.key == "export.error.too_big"
    assert "at most 4000" in info.value.message.render("en")


# ---------------------------------------------------------------- Moodle XML


_SUB = re.compile(r"\{1:(NUMERICAL|SHORTANSWER|MULTICHOICE_V):(.*?)\}(?=</td>|</p>)")


def _cloze_answers(ex, text: str) -> dict:
    """What a student who types the right, rounded value in every box sends, read from the cloze text."""
    subs = iter(_SUB.findall(text))
    answer = {}
    tolerances = grading.cell_tolerances(ex)
    for part in ex.parts:
        if part.is_choice:
            kind, body = next(subs)
            assert kind == "MULTICHOICE_V"
            options = re.split(r"(?<!\\)~", body)
            assert len(options) == len(part.options)
            answer[part.name] = chr(ord("A") + next(i for i, o in enumerate(options) if o.startswith("=")))
            continue
        rows = []
        for r in range(part.shape[0]):
            row = []
            for c in range(part.shape[1]):
                kind, body = next(subs)
                if kind == "SHORTANSWER":
                    assert body.startswith("=-inf")
                    row.append("-inf")
                    continue
                value, tolerance = (float(x) for x in body.lstrip("=").split(":"))
                rule = 0 if part.decimals == 0 else tolerances[part.name][r, c]  # the grader's, slack included
                assert tolerance == pytest.approx(rule, abs=1e-12), (ex.id, part.name, r, c, tolerance, rule)
                typed = float(round_half_up(value, part.decimals)) if part.decimals else value
                assert abs(typed - value) <= tolerance + 1e-12  # Moodle takes the rounded value too
                row.append(f"{typed:.{part.decimals}f}" if part.decimals else str(int(value)))
            rows.append(" ".join(row))
        answer[part.name] = "; ".join(rows)
    assert next(subs, None) is None
    return answer


def test_moodle_xml_of_a_mixed_assignment_round_trips_through_the_grader():
    spec = make_spec("Week 3 <b>&</b> \"x\"", MIXED, seed=5)
    sets = [(None, spec.exercises()), ("Ada", make_spec("v", MIXED, seed=5, per_student=True).exercises("Ada"))]
    root = ET.fromstring(moodle.to_xml(spec.title, "K7QMX2PD", sets))
    categories = [q.find("category/text").text for q in root if q.get("type") == "category"]
    assert categories == ['$course$/top/Attention by hand/Week 3 <b>&<∕b> "x" (K7QMX2PD)',
                          '$course$/top/Attention by hand/Week 3 <b>&<∕b> "x" (K7QMX2PD)/Ada']
    questions = [q for q in root if q.get("type") == "cloze"]
    flat = [ex for _, exs in sets for ex in exs]
    assert len(questions) == len(flat)
    kinds_seen = set()
    for q, ex in zip(questions, flat):
        text = q.find("questiontext/text").text
        assert "\\[" in text and "\\begin{bmatrix}" in text or ex.kind == "concepts"  # TeX for MathJax
        fb = grading.grade(ex, _cloze_answers(ex, text))
        assert fb.graded and fb.score == 1.0, (ex.kind, fb.message)
        kinds_seen.add(ex.kind)
    assert kinds_seen == {i["kind"] for i in MIXED}


def test_moodle_text_is_escaped():
    ex = exercises.generate("concepts", seed=0, level=1)
    xml = moodle.to_xml("</text>]]><x>", None, [(None, [ex])]).decode()
    root = ET.fromstring(xml)
    assert root.find("question/category/text").text.endswith("<∕text>]]><x>")  # "/" is the path separator
    assert np.isfinite(ex.parts[-1].reference).all()


# ---------------------------------------------------------------- hostile text: one escaping rule


HOSTILE = ["[Log in here](https://evil.example/x)", "![p](http://127.0.0.1:9/p.png)", r"$\kern-60em\rule{99em}{9em}$",
           '<img src="http://127.0.0.1:9/h.png" onerror="alert(1)">', ":red[**loud**] `code`", "*a* _b_ ~~c~~",
           r"\input{/etc/passwd} \def\x{y} 100% & #1 ^_~", "#set page(fill: red) #strong[x] \" \\ $x$ <l> @ref",
           "]]></text></questiontext><x>", "{1:NUMERICAL:=9:100}"]
ACTIVE_MD = ["](", "![", "$\\", "<img", ":red[", "`code`", "~~c~~", "*a*"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_titles_and_names_stay_text_in_every_format(hostile, tmp_path):
    import dataclasses

    spec = make_spec(hostile, [{"kind": "scores", "level": 1, "count": 1}], seed=1, per_student=True)
    name = hostile[:80].replace("\t", " ")
    ws = dataclasses.replace(worksheets.build(spec, [name], code="K7QMX2PD"), links=((name, "https://a.example/?t=1"),))
    for key in (False, True):
        md = re.sub(r"\\.", "", worksheets.to_markdown(ws, key))  # what stays active once escapes are read
        assert not any(a in md for a in ACTIVE_MD), md[:300]
        tex = worksheets.to_latex(ws, key)
        for bad in (r"\input", r"\def", r"$\kern", "100% ", "& #1"):
            assert bad not in tex
        text = " ".join(pdf_text(worksheets.to_pdf(ws, key), tmp_path).split())
        assert " ".join(spec.title.split()) in text  # shown as typed (the title is NFKC-normalised)
    xml = moodle.to_xml(spec.title, "K7QMX2PD", [(name, spec.exercises(name))])
    root = ET.fromstring(xml)  # still well-formed
    (question,) = [q for q in root if q.get("type") == "cloze"]
    assert "9:100" not in question.find("questiontext/text").text  # no cloze answer smuggled in
    assert root.find("question/category/text").text.endswith(name.replace("/", "∕"))


XML_FORBIDDEN = ["\uffff", "\ufffe", "\x00", "\x01", "\x1b", "\ud800", "\udfff"]


@pytest.mark.parametrize("bad", XML_FORBIDDEN, ids=lambda c: f"U+{ord(c):04X}")
def test_characters_xml_forbids_never_reach_the_moodle_xml(bad):
    """U+FFFF in a title or a name made the export unreadable: they are removed."""
    ex = exercises.generate("scores", seed=1, level=1)
    xml = moodle.to_xml(f"Week{bad} 3", "K7QMX2PD", [(f"Ada{bad} Lovelace", [ex]), (None, [ex])])
    root = ET.fromstring(xml)  # well-formed
    categories = [q.find("category/text").text for q in root if q.get("type") == "category"]
    assert categories[0].endswith("/Week 3 (K7QMX2PD)/Ada Lovelace")
    spec = make_spec(f"Week{bad} 3", [{"kind": "scores", "level": 1, "count": 1}], seed=1, per_student=True)
    ET.fromstring(moodle.to_xml(spec.title, None, [(f"Ada{bad}", spec.exercises("Ada"))]))


# ---------------------------------------------------------------- the service: off the script run, to disk


@pytest.fixture
def sqlite_db(tmp_path, monkeypatch):
    from services import db as services_db

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "class.sqlite3"))
    return services_db.engine()


def test_exports_build_a_class_in_the_background_and_serve_it_from_disk(sqlite_db):
    import time

    from services import assignments, exports

    a = assignments.create("Exports", [{"kind": "scores", "level": 1, "count": 1}], seed=4, per_student=True).assignment
    job = exports.start(a, ["Ada", "Alan"], "en", space="none", links={"Ada": "https://a.example/?t=x"})
    assert exports.get(job.id) is job and job.total == 4
    deadline = time.monotonic() + 120
    while not job.done and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job.done and job.error is None and job.fraction == 1.0
    assert job.path.is_file() and job.path.parent.name.startswith("attention-sheets-")
    with zipfile.ZipFile(job.path) as archive:
        assert len(archive.namelist()) == 4
    assert job.read()[:2] == b"PK"
    with pytest.raises(exercises.teacher.assignments.AssignmentError):
        exports.start(a, [f"S{i}" for i in range(201)], "en")
    xml = exports.moodle(a, ["Ada"], "en")
    assert ET.fromstring(xml).find("question/category/text").text.endswith("/Ada")
    assert exports.moodle(a, [], "en", variants=3).count(b'type="category"') == 3


def test_a_class_pdf_is_compiled_outside_the_server_process(sqlite_db):
    import os

    from exercises.worksheets import files
    from services import assignments

    a = assignments.create("Class", [{"kind": "scores", "level": 1, "count": 1}], seed=4).assignment
    assert assignments.pdf(a, (), "en", "answer-key.pdf").startswith(b"%PDF")
    assert files._ISOLATED is not None
    assert files._ISOLATED.pids() and os.getpid() not in files._ISOLATED.pids()


def test_the_moodle_xml_is_written_off_the_script_run_by_a_child_process(sqlite_db, monkeypatch):
    """200 students × 40 level-3 items cost 75 s of CPU inside the server process. The
    exercises are now read (or made) and the questions written by a child process, one student's set
    at a time, with progress."""
    import time

    from services import assignments, exports

    def in_this_process(*args, **kwargs):
        raise AssertionError("Moodle questions written in the server process")

    monkeypatch.setattr(moodle, "xml_pieces", in_this_process)  # the child imports its own
    monkeypatch.setattr(moodle, "question_text", in_this_process)
    monkeypatch.setattr(assignments, "exercises_for", in_this_process)  # … and reads or makes the exercises
    a = assignments.create("Moodle \uffff", [{"kind": "scores", "level": 1, "count": 2}], seed=4,
                           per_student=True).assignment
    started = time.monotonic()
    job = exports.start_moodle(a, ["Ada", "Alan", "Grace"], "en")
    assert time.monotonic() - started < 2 and job.total == 3 and job.mime == "application/xml"
    deadline = time.monotonic() + 120
    while not job.done and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.done and job.error is None and job.fraction == 1.0 and job.finished == 3
    root = ET.fromstring(job.read())
    assert [q.find("category/text").text.rsplit("/", 1)[-1] for q in root if q.get("type") == "category"] \
        == ["Ada", "Alan", "Grace"]
    assert len([q for q in root if q.get("type") == "cloze"]) == 6
    assert ET.fromstring(exports.moodle(a, ["Ada"], "en")).find("question/category/text").text.endswith("/Ada")


def test_the_moodle_xml_keeps_the_print_cap(sqlite_db):
    from exercises.teacher.assignments import MAX_ITEMS, AssignmentError
    from services import assignments, exports

    a = assignments.create("Big", [{"kind": "scores", "level": 1, "count": 20}] * (MAX_ITEMS // 20), seed=4,
                           per_student=True).assignment
    students = [f"S{i}" for i in range(worksheets.MAX_EXERCISES // MAX_ITEMS + 1)]
    for make in (exports.start_moodle, exports.moodle):
        with pytest.raises(AssignmentError) as refused:
            make(a, students, "en")
        assert refused.value.message.key == "export.error.too_big"
    with pytest.raises(AssignmentError):
        exports.start_moodle(a, [], "en", variants=worksheets.MAX_EXERCISES)


def test_a_moodle_child_that_dies_is_a_message(sqlite_db, monkeypatch):
    import time

    from services import assignments, exports

    monkeypatch.setattr(exports, "MOODLE_CHILD_MEMORY", 50 * 2**20)  # too little to import the engine
    a = assignments.create("Small", [{"kind": "scores", "level": 1, "count": 1}], seed=4).assignment
    job = exports.start_moodle(a, [], "en")
    deadline = time.monotonic() + 60
    while not job.done and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.done and job.error is not None and job.error.key == "export.error.moodle_failed"
