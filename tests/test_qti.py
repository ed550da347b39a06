"""The QTI 2.1 package beside the Moodle XML: every file validated against XML Schemas of the QTI 2.1
and IMS Content Packaging 1.1 elements it uses (tests/schemas/: written from the official
imsqti_v2p1.xsd and imscp_v1p1.xsd definitions of those elements, their order, required attributes
and types; the IMS files themselves are on no package registry), its response processing run on
typed answers, and the same answers read back through the grader at 1.0."""

from __future__ import annotations

import functools
import io
import math
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
from lxml import etree

import exercises
from exercises.core import grading
from exercises.teacher.assignments import make_spec
from exercises.worksheets import qti
from tests.test_exports import MIXED  # the mixed assignment of the Moodle test

Q = "{" + qti.NS + "}"
CP = "{" + qti.CP_NS + "}"
SCHEMAS = Path(__file__).parent / "schemas"


@functools.cache
def schema(name: str) -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(SCHEMAS / name)))


def valid(text: str | bytes, name: str, where: str) -> ET.Element:
    """The document parsed, after its schema (qti_v2p1_subset.xsd or imscp_v1p1_subset.xsd) accepts it."""
    data = text.encode() if isinstance(text, str) else text
    checker = schema(name)
    assert checker.validate(etree.fromstring(data)), f"{where}: {checker.error_log.last_error}"
    return ET.fromstring(data)


def package(sets, title="Week 3 <b>&</b>", code="K7QMX2PD") -> dict[str, bytes]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for files in qti.package_pieces(title, code, sets):
            for name, text in files:
                z.writestr(name, text)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as z:
        return {name: z.read(name) for name in z.namelist()}


def check_item(text: str | bytes, where: str) -> tuple[ET.Element, dict[str, ET.Element]]:
    """An item the QTI schema accepts, whose interactions are its declared responses one to one and
    whose processing reads only what it declares: (the item, its response declarations by identifier)."""
    root = valid(text, "qti_v2p1_subset.xsd", where)
    declared = {d.get("identifier"): d for d in root.iter(Q + "responseDeclaration")}
    outcomes = {o.get("identifier") for o in root.iter(Q + "outcomeDeclaration")}
    assert outcomes == {"SCORE", "MAXSCORE"}, where
    interactions = [e.get("responseIdentifier") for e in root.find(Q + "itemBody").iter()
                    if e.tag in (Q + "textEntryInteraction", Q + "choiceInteraction")]
    assert sorted(interactions) == sorted(declared), f"{where}: one interaction per declared response"
    for e in root.find(Q + "responseProcessing").iter():
        assert e.tag not in (Q + "variable", Q + "correct") or e.get("identifier") in declared or e.get("identifier") in outcomes, f"{where}: {e.get('identifier')}"
    return root, declared


# ---------------------------------------------------------------- the item's own response processing


def _value(e: ET.Element, responses: dict, declared: dict, outcomes: dict):
    tag = e.tag.removeprefix(Q)
    if tag == "variable":
        ident = e.get("identifier")
        return outcomes[ident] if ident in outcomes else responses.get(ident)
    if tag == "correct":
        return declared[e.get("identifier")].find(f"{Q}correctResponse/{Q}value").text
    if tag == "baseValue":
        return e.text
    args = [_value(c, responses, declared, outcomes) for c in e]
    if tag == "sum":
        return sum(float(a) for a in args)
    if tag == "or":
        return any(args)
    if tag == "match":
        return None if None in args else args[0] == args[1]
    if tag == "stringMatch":
        return None if None in args else str(args[0]).casefold() == str(args[1]).casefold()
    if tag == "equal":
        if None in args:
            return None
        x, y = float(args[0]), float(args[1])
        if e.get("toleranceMode") == "exact":
            return x == y
        low, high = ([float(t) for t in e.get("tolerance").split()] * 2)[:2]
        return y - low <= x <= y + high
    raise AssertionError(f"an operator this test does not run: {tag}")


def qti_score(root: ET.Element, responses: dict[str, str]) -> float:
    """SCORE after the item's response processing, for typed responses {identifier: text}."""
    declared = {d.get("identifier"): d for d in root.iter(Q + "responseDeclaration")}
    outcomes = {"SCORE": 0.0, "MAXSCORE": 1.0}
    for condition in root.find(Q + "responseProcessing"):
        test, action = list(condition.find(Q + "responseIf"))
        if _value(test, responses, declared, outcomes):
            outcomes["SCORE"] = _value(action[0], responses, declared, outcomes)
    return outcomes["SCORE"]


def typed(ex, declared: dict[str, ET.Element]) -> tuple[dict[str, str], dict]:
    """What a student who types each right value, rounded to the part's places, sends: (QTI responses,
    the same as the grader's answer)."""
    responses, answer = {}, {}
    for part in ex.parts:
        if part.is_choice:
            ident = qti.response_id(part)
            responses[ident] = declared[ident].find(f"{Q}correctResponse/{Q}value").text
            answer[part.name] = chr(ord("A") + int(responses[ident][1:]))
            continue
        rows = []
        for r in range(part.shape[0]):
            row = []
            for c in range(part.shape[1]):
                ident = qti.response_id(part, r, c)
                text = declared[ident].find(f"{Q}correctResponse/{Q}value").text
                if text != "-inf":
                    x = float(text)
                    text = f"{x:.{part.decimals}f}" if part.decimals else str(int(x))
                responses[ident] = text
                row.append(text)
            rows.append(" ".join(row))
        answer[part.name] = "; ".join(rows)
    return responses, answer


def test_the_qti_package_is_well_formed_and_round_trips_through_the_grader():
    spec = make_spec("Week 3 <b>&</b>", MIXED, seed=5)
    sets = [(None, spec.exercises()), ("Ada", make_spec("v", MIXED, seed=5, per_student=True).exercises("Ada"))]
    files = package(sets)
    manifest = valid(files["imsmanifest.xml"], "imscp_v1p1_subset.xsd", "imsmanifest.xml")
    hrefs = [r.get("href") for r in manifest.iter(CP + "resource")]
    assert all(h in files for h in hrefs) and len(hrefs) == len(files) - 1, f"the manifest lists every file: {hrefs}"
    needs = [d.get("identifierref") for d in manifest.iter(CP + "dependency")]
    assert needs == [r.get("identifier") for r in manifest.iter(CP + "resource")][1:], "the test needs every item"
    made = b"".join(files.values())
    assert all(w in made for w in (b"<choiceInteraction", b"<stringMatch", b'"absolute"', b'"exact"', b"<em>")), \
        "the schema has seen every construct the export writes"
    test = valid(files["test.xml"], "qti_v2p1_subset.xsd", "test.xml")
    sections = test.findall(f"{Q}testPart/{Q}assessmentSection")
    assert [s.get("title") for s in sections] == ["Week 3 <b>&</b> (K7QMX2PD)", "Ada"], "a bank per set"
    flat = [ex for _, exs in sets for ex in exs]
    refs = [ref.get("href") for s in sections for ref in s.findall(Q + "assessmentItemRef")]
    assert len(refs) == len(flat)
    kinds_seen = set()
    for href, ex in zip(refs, flat):
        where = f"{href} ({ex.kind} level {ex.level} seed {ex.seed})"
        root, declared = check_item(files[href], where)
        responses, answer = typed(ex, declared)
        assert math.isclose(qti_score(root, responses), 1.0), f"{where}: the item's own processing"
        fb = grading.grade(ex, answer)
        assert fb.graded and fb.score == 1.0, f"{where}: {fb.message}"
        kinds_seen.add(ex.kind)
    assert kinds_seen == {i["kind"] for i in MIXED}


def test_a_cell_outside_the_tolerance_loses_its_share_in_qti_and_in_the_grader():
    ex = exercises.generate("softmax", seed=3, level=2)
    root, declared = check_item(qti.item_xml("I1", "softmax", ex), "softmax")
    responses, _ = typed(ex, declared)
    part = ex.parts[0]
    ident = qti.response_id(part, 0, 0)
    x = float(declared[ident].find(f"{Q}correctResponse/{Q}value").text)
    inside, outside = dict(responses), dict(responses)
    inside[ident] = repr(x + 0.9 * part.tolerance)
    outside[ident] = repr(x + 3 * part.tolerance)
    cells = part.shape[0] * part.shape[1]
    assert math.isclose(qti_score(root, inside), 1.0), "within the tolerance: right"
    assert math.isclose(qti_score(root, outside), 1 - 1 / (len(ex.parts) * cells)), "outside: that cell's share lost"
    assert not grading.grade(ex, {part.name: [[float(outside[qti.response_id(part, r, c)]) for c in range(
        part.shape[1])] for r in range(part.shape[0])]}).parts[part.name].cells[0, 0], "the grader agrees"


def test_the_schemas_refuse_what_the_official_definitions_refuse():
    """The test schemas bite: an item out of the official order, one missing a required attribute, a
    tolerance that is not a list of numbers, a manifest without its resources are each refused."""
    item = qti.item_xml("I1", "scores", exercises.generate("scores", seed=1, level=1))
    body = item[item.index("<itemBody>"):item.index("</itemBody>") + len("</itemBody>")]
    first = item.index("<outcomeDeclaration")
    broken = {
        "itemBody before the outcomes": item.replace(body, "")[:first] + body + item.replace(body, "")[first:],
        "no adaptive attribute": item.replace(' adaptive="false"', ""),
        "a tolerance of words": item.replace('toleranceMode="exact"', 'toleranceMode="absolute" tolerance="a b"'),
        "a response identifier that is no NCName": item.replace('identifier="R_', 'identifier="1R_', 1),
    }
    for what, text in broken.items():
        assert text != item and not schema("qti_v2p1_subset.xsd").validate(etree.fromstring(text.encode())), what
    manifest = dict(package([(None, [exercises.generate("scores", seed=1, level=1)])]))["imsmanifest.xml"].decode()
    no_resources = manifest[:manifest.index("<resources>")] + "</manifest>\n"
    assert not schema("imscp_v1p1_subset.xsd").validate(etree.fromstring(no_resources.encode())), "no resources"


def test_text_in_the_package_is_escaped():
    ex = exercises.generate("concepts", seed=0, level=1)
    files = package([("</title>\"&<x>\uffff", [ex])], title="<script>")
    test = valid(files["test.xml"], "qti_v2p1_subset.xsd", "test.xml")
    assert test.get("title") == "<script>" and test.find(f"{Q}testPart/{Q}assessmentSection").get("title") == \
        "</title>\"&<x>", "names and titles are text, characters XML forbids dropped"


def test_the_export_child_writes_the_package_a_set_at_a_time(tmp_path, monkeypatch):
    """What the export child runs (services.exports.write_moodle_here; the child process itself is the
    Moodle XML's, tested with it), here in this process: one piece per student's bank, then the end."""
    from services import assignments, exports

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "class.sqlite3"))
    a = assignments.create("QTI", [{"kind": "scores", "level": 1, "count": 2}], seed=4, per_student=True).assignment
    pieces: list[int] = []
    path = tmp_path / "bank.zip"
    exports.write_moodle_here({"code": a.code, "names": ["Ada", "Alan"], "variants": 0, "lang": "zh",
                               "path": str(path), "format": "qti"}, lambda: pieces.append(1))
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        test = ET.fromstring(z.read("test.xml"))
    assert len(pieces) == 2 + 2, "the head, a piece per student, the end: the parent's progress protocol"
    assert "imsmanifest.xml" in names and len([n for n in names if n.startswith("items/")]) == 4, names
    assert [s.get("title") for s in test.iter(Q + "assessmentSection")] == ["Ada", "Alan"], "a bank per student"


def test_a_careful_students_value_right_only_through_slack_is_right_in_both_exports():
    """backprop level 1, r = 10/3 written as 3.33: G_scaled's (2/3)(4 − 3.33) = 0.45 against 4/9, beyond the part's
    plain tolerance; the app takes it (the policy's slack), so must the QTI item and the Moodle Cloze."""
    from exercises.worksheets import moodle
    from tests.test_exports import _SUB
    from tests.test_fair_grading import BACKPROP_L1, Hand, policy_answer

    ex, answer = BACKPROP_L1, policy_answer(BACKPROP_L1, Hand(2, 3, copy_places=9))
    part = ex.part("G_scaled")
    off = np.argwhere(np.abs(answer["G_scaled"] - part.reference) > part.tolerance)
    assert off.tolist() == [[1, 0]] and answer["G_scaled"][1, 0] == 0.45, (ex.id, answer["G_scaled"])
    assert grading.grade(ex, answer).correct, "the app takes the careful student's work"
    root, declared = check_item(qti.item_xml("I1", "backprop", ex), "backprop level 1")
    responses, _ = typed(ex, declared)
    responses[qti.response_id(part, 1, 0)] = "0.45"
    assert math.isclose(qti_score(root, responses), 1.0), "QTI: 0.45 for 4/9 after r = 3.33"
    cloze = _SUB.findall(moodle.question_text(ex))
    first = sum(p.reference.size for p in ex.parts[:ex.parts.index(part)])
    value, tolerance = (float(x) for x in cloze[first + part.shape[1]][1].lstrip("=").split(":"))  # row 2, column 1
    assert abs(0.45 - value) <= tolerance and tolerance > part.tolerance, ("Moodle", value, tolerance)
