"""An assignment as Moodle XML: each exercise one Cloze (embedded answers, "multianswer") question.

Every cell of a number part is a NUMERICAL sub-question whose answer is the exact reference and
whose tolerance is the grader's own for that cell (grading.cell_tolerances: the part's tolerance widened by
what the rounding policy reaches on the way; exact for whole numbers), so Moodle takes exactly what
exercises.grade takes for a cell on its own; a −∞ cell is a
SHORTANSWER (-inf or −∞); a choice part is a MULTICHOICE. The prompt and the given matrices are
HTML with TeX in \\( … \\) and \\[ … \\], which Moodle's MathJax filter renders. One question-bank
category per set (the class's, a student's, or a shuffled variant).

Moodle grades each cell alone: "round what you write, then compute" (a cell right from the learner's
own earlier values) is not carried over, so a Moodle mark can be below the app's for the same work.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from xml.sax.saxutils import escape as _xml

from ..core.engine import prompt
from ..core.grading import cell_tolerances
from ..core.model import Exercise, Part
from ..i18n import DEFAULT_LANG, escape, t
from ..rendering import latex
from .model import option_text, problem
from .text import latex_given

__all__ = ["cloze_answer", "question_text", "to_xml", "xml_pieces"]

_CLOZE_SPECIAL = "\\}#~/\"{"  # escaped with a backslash inside a Cloze answer


def _cloze_text(text: str) -> str:
    return "".join("\\" + c if c in _CLOZE_SPECIAL else c for c in str(text))


def _number(x: float) -> str:
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


def cloze_answer(part: Part, x: float, tolerance: float | None = None) -> str:
    """The Cloze sub-question of one cell, right within `tolerance` (default: the part's own)."""
    if math.isinf(x):
        return "{1:SHORTANSWER:=-inf~=−∞~=-∞}"
    tolerance = 0 if part.decimals == 0 else part.tolerance if tolerance is None else float(tolerance)
    return f"{{1:NUMERICAL:={_number(x)}:{_number(tolerance) if tolerance else 0}}}"


def _choice(part: Part, lang: str) -> str:
    right = int(part.reference[0, 0])
    options = [("=" if i == right else "") + _cloze_text(_xml(escape.CONTROL.sub("", option_text(o, part, lang))))
               for i, o in enumerate(part.options or ())]
    return "{1:MULTICHOICE_V:" + "~".join(options) + "}"


def _given_tex(ex: Exercise) -> list[str]:
    return [latex_given(g) for g in problem(ex, 1, DEFAULT_LANG).given]


def question_text(ex: Exercise, lang: str = DEFAULT_LANG) -> str:
    """The question's HTML: prompt, rounding rule, given values in TeX, then a grid of answer boxes per part."""
    p = problem(ex, 1, lang)
    out = [f"<p>{escape.html(prompt(ex, lang))}</p>"]
    out += [f"<p><em>{escape.html(n)}</em></p>" for n in p.notes]
    given = _given_tex(ex)
    tolerances = cell_tolerances(ex)
    if given:
        out.append("<p>\\[ " + escape.html(r",\qquad ".join(given)) + " \\]</p>")
    for part, words in p.asks:
        out.append(f"<p>{escape.html(words)}</p>")
        if part.is_choice:
            out.append(f"<p>{_choice(part, lang)}</p>")
            continue
        rows = "".join("<tr>" + "".join(f"<td>{cloze_answer(part, float(x), tol)}</td>" for x, tol in zip(row, tols))
                       + "</tr>" for row, tols in zip(part.reference, tolerances[part.name]))
        label = "" if part.prompt else f"<p>\\( {escape.html(latex.symbol(part.name))} = \\)</p>"
        out.append(f'{label}<table class="attention-grid">{rows}</table>')
    return "\n".join(out)


def _question(name: str, ex: Exercise, lang: str) -> str:
    return (f'  <question type="cloze">\n    <name><text>{_xml(name)}</text></name>\n'
            f'    <questiontext format="html"><text><![CDATA[{_cdata(question_text(ex, lang))}]]></text>'
            '</questiontext>\n'
            f'    <generalfeedback format="html"><text></text></generalfeedback>\n'
            f'    <penalty>0.3333333</penalty>\n    <hidden>0</hidden>\n'
            f'    <idnumber>{_xml(f"{ex.kind}-{ex.level}-{ex.version}")}</idnumber>\n  </question>\n')


def _cdata(text: str) -> str:
    return text.replace("]]>", "]]]]><![CDATA[>")


def to_xml(title: str, code: str | None, sets: Iterable[tuple[str | None, Sequence[Exercise]]],
           lang: str = DEFAULT_LANG) -> bytes:
    """Moodle XML of `sets` [(name or None, exercises)]: a category per set, a Cloze question per exercise."""
    return "".join(xml_pieces(title, code, sets, lang)).encode("utf-8")


def xml_pieces(title: str, code: str | None, sets: Iterable[tuple[str | None, Sequence[Exercise]]],
               lang: str = DEFAULT_LANG) -> Iterator[str]:
    """to_xml's text piece by piece, for writing to a file as it is made: the head, one piece per set
    (its category and questions; `sets` is read lazily), then the end. No character XML forbids
    (U+FFFF, U+0000 …: a title or a name may hold them) is left in any piece."""
    base = "$course$/top/" + _category(t("worksheet.default_title", lang)) + "/" + _category(
        f"{title} ({code})" if code else title)
    yield '<?xml version="1.0" encoding="UTF-8"?>\n<quiz>\n'
    for name, exercises in sets:
        category = base + ("/" + _category(name) if name else "")
        out = [f'  <question type="category">\n    <category><text>{_xml(category)}</text></category>\n'
               f'  </question>\n']
        for number, ex in enumerate(exercises, start=1):
            out.append(_question(f"{number}. {t(f'kind.{ex.kind}.title', lang)}", ex, lang))
        yield escape.xml_chars("".join(out))
    yield "</quiz>\n"


def _category(text: str) -> str:
    """A category path element: no '/' (Moodle's separator)."""
    return escape.CONTROL.sub("", str(text)).replace("/", "∕")
