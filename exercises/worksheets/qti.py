"""An assignment as a QTI 2.1 content package (a zip): one assessmentItem per exercise, one section
per set in an assessmentTest (the class's set, or each student's variants as a bank of their own),
and the imsmanifest.xml an LMS (Canvas, Blackboard, Brightspace, Moodle with a QTI plugin) imports.

Every cell of a number part is a textEntryInteraction with a float response whose correct value is the
exact reference; the item's response processing adds the cell's weight to SCORE when the answer is
within the grader's own tolerance for that cell (`equal`, absolute, grading.cell_tolerances: the part's
tolerance widened by what the rounding policy reaches on the way; exact for whole numbers), so a
part's cells share the part's weight and the parts share 1, as exercises.grade scores. A −∞ cell is a
string response (-inf or −∞); a choice part a choiceInteraction. As in the Moodle export, each cell is
judged alone: "round what you write, then compute" from the learner's own earlier values is not
carried over.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from xml.sax.saxutils import escape as _xml
from xml.sax.saxutils import quoteattr

from ..core.engine import prompt
from ..core.grading import cell_tolerances
from ..core.model import Exercise, Part
from ..i18n import DEFAULT_LANG, escape, t
from .model import option_text, problem
from .text import latex_given

__all__ = ["NS", "item_xml", "package_pieces", "response_id"]

NS = "http://www.imsglobal.org/xsd/imsqti_v2p1"
CP_NS = "http://www.imsglobal.org/xsd/imscp_v1p1"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
_LOCATION = f"{NS} http://www.imsglobal.org/xsd/qti/qtiv2p1/imsqti_v2p1.xsd"
MINUS_INFINITY = ("-inf", "−∞", "-∞")


def _attr(text: object) -> str:
    return quoteattr(escape.xml_chars(str(text)))


def _text(text: object) -> str:
    return _xml(escape.xml_chars(str(text)))


def _ident(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def response_id(part: Part, row: int | None = None, col: int | None = None) -> str:
    """The response identifier of a cell (or of a choice part, without row and column)."""
    return f"R_{_ident(part.name)}" + ("" if row is None else f"_{row}_{col}")


def _number(x: float) -> str:
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


def _declarations(ex: Exercise) -> list[str]:
    out = []
    for part in ex.parts:
        if part.is_choice:
            out.append(f'<responseDeclaration identifier="{response_id(part)}" cardinality="single" '
                       f'baseType="identifier"><correctResponse><value>C{int(part.reference[0, 0])}</value>'
                       "</correctResponse></responseDeclaration>")
            continue
        for (r, c), x in _cells(part):
            kind, value = ("string", "-inf") if math.isinf(x) else ("float", _number(x))
            out.append(f'<responseDeclaration identifier="{response_id(part, r, c)}" cardinality="single" '
                       f'baseType="{kind}"><correctResponse><value>{value}</value></correctResponse>'
                       "</responseDeclaration>")
    out.append('<outcomeDeclaration identifier="SCORE" cardinality="single" baseType="float">'
               "<defaultValue><value>0</value></defaultValue></outcomeDeclaration>")
    out.append('<outcomeDeclaration identifier="MAXSCORE" cardinality="single" baseType="float">'
               "<defaultValue><value>1</value></defaultValue></outcomeDeclaration>")
    return out


def _cells(part: Part) -> Iterator[tuple[tuple[int, int], float]]:
    for r, row in enumerate(part.reference):
        for c, x in enumerate(row):
            yield (r, c), float(x)


def _right(part: Part, ident: str, x: float, tolerance: float = 0.0) -> str:
    """The condition under which the cell's answer is right (the grader's tolerance for that cell)."""
    mine = f'<variable identifier="{ident}"/>'
    if part.is_choice:
        return f'<match>{mine}<correct identifier="{ident}"/></match>'
    if math.isinf(x):
        return "<or>" + "".join(f'<stringMatch caseSensitive="false">{mine}<baseValue baseType="string">'
                                f"{_text(v)}</baseValue></stringMatch>" for v in MINUS_INFINITY) + "</or>"
    if part.decimals == 0 or not tolerance:
        return f'<equal toleranceMode="exact">{mine}<correct identifier="{ident}"/></equal>'
    tol = _number(tolerance)
    return f'<equal toleranceMode="absolute" tolerance="{tol} {tol}">{mine}<correct identifier="{ident}"/></equal>'


def _processing(ex: Exercise) -> str:
    rules = []
    tolerances = cell_tolerances(ex)
    for part in ex.parts:
        cells = [(response_id(part), 0.0, 0.0)] if part.is_choice else [
            (response_id(part, r, c), x, tolerances[part.name][r, c]) for (r, c), x in _cells(part)]
        weight = _number(1.0 / (len(ex.parts) * len(cells)))
        for ident, x, tolerance in cells:
            rules.append(f"<responseCondition><responseIf>{_right(part, ident, x, tolerance)}"
                         '<setOutcomeValue identifier="SCORE"><sum><variable identifier="SCORE"/>'
                         f'<baseValue baseType="float">{weight}</baseValue></sum></setOutcomeValue>'
                         "</responseIf></responseCondition>")
    return "<responseProcessing>" + "".join(rules) + "</responseProcessing>"


def _body(ex: Exercise, lang: str) -> str:
    p = problem(ex, 1, lang)
    out = [f"<p>{_text(prompt(ex, lang))}</p>"]
    out += [f"<p><em>{_text(n)}</em></p>" for n in p.notes]
    given = [latex_given(g) for g in problem(ex, 1, DEFAULT_LANG).given]
    if given:
        tex = "\\[ " + r",\qquad ".join(given) + " \\]"
        out.append(f"<p>{_text(tex)}</p>")
    for part, words in p.asks:
        out.append(f"<p>{_text(words)}</p>")
        if part.is_choice:
            choices = "".join(f'<simpleChoice identifier="C{i}">{_text(option_text(o, part, lang))}</simpleChoice>'
                              for i, o in enumerate(part.options or ()))
            out.append(f'<choiceInteraction responseIdentifier="{response_id(part)}" shuffle="false" '
                       f'maxChoices="1">{choices}</choiceInteraction>')
            continue
        rows = "".join("<tr>" + "".join(f'<td><textEntryInteraction responseIdentifier="{response_id(part, r, c)}" '
                                        f'expectedLength="8"/></td>' for c in range(len(row))) + "</tr>"
                       for r, row in enumerate(part.reference))
        out.append(f"<table><tbody>{rows}</tbody></table>")
    return "<itemBody>" + "".join(out) + "</itemBody>"


def item_xml(identifier: str, title: str, ex: Exercise, lang: str = DEFAULT_LANG) -> str:
    """One exercise as a QTI 2.1 assessmentItem."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<assessmentItem xmlns="{NS}" xmlns:xsi="{_XSI}" xsi:schemaLocation="{_LOCATION}" '
            f'identifier={_attr(identifier)} title={_attr(title)} adaptive="false" timeDependent="false">'
            + "".join(_declarations(ex)) + _body(ex, lang) + _processing(ex) + "</assessmentItem>\n")


def package_pieces(title: str, code: str | None, sets: Iterable[tuple[str | None, Sequence[Exercise]]],
                   lang: str = DEFAULT_LANG) -> Iterator[list[tuple[str, str]]]:
    """The package's files, (path in the zip, text), piece by piece: nothing for the head, one piece per
    set (its items; `sets` is read lazily), then the assessmentTest and the manifest."""
    yield []
    sections, resources, depends = [], [], []
    for s, (name, exercises) in enumerate(sets, start=1):
        files, refs = [], []
        for number, ex in enumerate(exercises, start=1):
            ident = f"S{s}_I{number}"
            href = f"items/{ident}.xml"
            files.append((href, item_xml(ident, f"{number}. {t(f'kind.{ex.kind}.title', lang)}", ex, lang)))
            refs.append(f'<assessmentItemRef identifier="{ident}" href="{href}"/>')
            resources.append(f'<resource identifier="RES_{ident}" type="imsqti_item_xmlv2p1" href="{href}">'
                             f'<file href="{href}"/></resource>')
            depends.append(f'<dependency identifierref="RES_{ident}"/>')
        label = name if name else (f"{title} ({code})" if code else title)
        sections.append(f'<assessmentSection identifier="S{s}" title={_attr(label)} visible="true">'
                        + "".join(refs) + "</assessmentSection>")
        yield files
    test = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<assessmentTest xmlns="{NS}" xmlns:xsi="{_XSI}" xsi:schemaLocation="{_LOCATION}" '
            f'identifier="TEST" title={_attr(title)}><testPart identifier="P1" navigationMode="nonlinear" '
            'submissionMode="simultaneous">' + "".join(sections) + "</testPart></assessmentTest>\n")
    manifest = ('<?xml version="1.0" encoding="UTF-8"?>\n'
                f'<manifest xmlns="{CP_NS}" identifier="MANIFEST"><organizations/><resources>'
                '<resource identifier="RES_TEST" type="imsqti_test_xmlv2p1" href="test.xml"><file href="test.xml"/>'
                + "".join(depends) + "</resource>" + "".join(resources) + "</resources></manifest>\n")
    yield [("test.xml", test), ("imsmanifest.xml", manifest)]
