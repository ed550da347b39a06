"""The answer parser: a small whitelist recursive-descent parser. User text never reaches eval.

Accepted in a cell: integers, decimals (``.5``, ``-1e-2``), fractions, ``+ - * / ^ **``, parentheses,
the constants ``e``, ``pi``, ``inf``/``∞``/``oo``/``infinity`` (any case), and the functions ``exp``,
``sqrt``/``√``, ``ln``/``log``. Unicode minus, ``×``, ``·``, ``÷``, full-width characters, superscript
exponents and a decimal comma in a lone number are normalised first. A pasted matrix may also
be LaTeX (``\\begin{bmatrix} 1 & \\frac{1}{3} \\\\ -\\infty & \\sqrt{2} \\end{bmatrix}``, pmatrix, matrix, …): a
cell then reads a whitelist of commands (``\\frac \\sqrt \\infty \\pi \\exp \\ln \\cdot \\times``, braces as
groups); LaTeX is never run, and any other command is refused by name. Every rejection is an
``AnswerError`` that says what and where. Two readings are refused rather than guessed: a power of ten
with a sign (``2e+1``) in a cell that also uses the constant e (is it 2·e + 1 or 20?), and a decimal
comma inside a matrix row (``0,5 0,25``: are the commas decimals or separators?).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from ..i18n import Msg, msg
from ..i18n.escape import untrusted

MAX_CELL_CHARS = 120  # one cell: room for e^2/(e^0+e^1+e^2) with spaces, no room for abuse
MAX_MATRIX_CHARS = 6000  # a pasted matrix
MAX_DEPTH = 16  # nesting of parentheses, unary signs and powers
MAX_MAGNITUDE = 1e12  # no hand calculation in this app comes near
MAX_CELLS = 400
# one run (an assignment's submit, a Check my work): the answer text of all its boxes together, as
# typed. A 40-item assignment of 8×8 matrices written to 3 decimals is about 20 000 characters.
MAX_RUN_CHARS = 60_000

FUNCTIONS = {"exp": math.exp, "sqrt": math.sqrt, "ln": math.log, "log": math.log}
CONSTANTS = {"e": math.e, "pi": math.pi, "π": math.pi, "inf": math.inf, "infinity": math.inf, "oo": math.inf}


class AnswerError(ValueError):
    """An answer that cannot be read. `message` is a catalog Msg; `row`/`col`/`pos` are 1-based."""

    def __init__(self, message: Msg, row: int | None = None, col: int | None = None, pos: int | None = None):
        super().__init__(str(message))
        self.message = message
        self.row, self.col, self.pos = row, col, pos


# ---------------------------------------------------------------- normalisation

_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUPERSCRIPT_RUN = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")
_REPLACEMENTS = {
    "−": "-", "–": "-", "—": "-", "‐": "-", "‑": "-",  # minus signs and dashes
    "×": "*", "·": "*", "⋅": "*", "∙": "*", "∗": "*", "÷": "/", "∕": "/",
    "∞": "inf", "√": "sqrt", "（": "(", "）": ")",
}
_LONE_COMMA_NUMBER = re.compile(r"^\s*[+-]?\d+,\d+\s*$")
_GLUED_COMMA = re.compile(r"(?<=\d),(?=\d)")  # 0,5: a decimal comma, or a separator typed without a space
_ROOT_OF_NUMBER = re.compile(r"√\s*(\d+(?:\.\d*)?|\.\d+)")  # √2 → sqrt(2)


def normalise(text: str, lone: bool = False) -> str:
    """Map look-alike characters to the ASCII the grammar knows; positions may shift slightly."""
    if text.isascii():  # (a fast path) every look-alike is outside ASCII: only a decimal comma can change
        return text.replace(",", ".") if lone and _LONE_COMMA_NUMBER.match(text) else text
    text = _SUPERSCRIPT_RUN.sub(lambda m: "^(" + m.group().translate(_SUPERSCRIPTS) + ")", text)
    text = unicodedata.normalize("NFKC", text)
    text = _ROOT_OF_NUMBER.sub(r"sqrt(\1)", text)
    for old, new in _REPLACEMENTS.items():
        text = text.replace(old, new)
    if lone and _LONE_COMMA_NUMBER.match(text):
        text = text.replace(",", ".")  # a decimal comma (0,5) in a lone number
    return text


# ---------------------------------------------------------------- tokens

_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-zπ]+)|(?P<op>\*\*|[-+*/^(){}])|(?P<cmd>\\(?:[A-Za-z]+|[^A-Za-z])))"
)
# LaTeX commands a cell may hold, as the token the grammar reads; None: spacing or sizing, skipped.
# \frac, \dfrac, \tfrac and \sqrt stay commands (they take braced arguments); anything else is refused.
LATEX_COMMANDS: dict[str, tuple[str, str] | None] = {
    r"\cdot": ("op", "*"), r"\times": ("op", "*"), r"\ast": ("op", "*"), r"\div": ("op", "/"),
    r"\infty": ("name", "inf"), r"\pi": ("name", "pi"),
    r"\exp": ("name", "exp"), r"\ln": ("name", "ln"), r"\log": ("name", "log"),
    r"\frac": ("cmd", r"\frac"), r"\dfrac": ("cmd", r"\frac"), r"\tfrac": ("cmd", r"\frac"),
    r"\sqrt": ("cmd", r"\sqrt"),
    r"\left": None, r"\right": None, r"\bigl": None, r"\bigr": None, r"\Bigl": None, r"\Bigr": None,
    r"\big": None, r"\Big": None, r"\mathrm": None, r"\,": None, r"\;": None, r"\:": None, r"\!": None,
    "\\ ": None, r"\quad": None, r"\qquad": None,
}


@dataclass(frozen=True)
class _Token:
    kind: str  # "num", "name", "op", "cmd" (\\frac, \\sqrt), "end"
    text: str
    pos: int  # 1-based character position


def _tokenize(text: str, where: Msg) -> list[_Token]:
    tokens, i = [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        m = _TOKEN.match(text, i)
        if not m:
            raise AnswerError(msg("parse.bad_char", where=where, char=untrusted(text[i]), pos=i + 1), pos=i + 1)
        kind, start = m.lastgroup, m.start(m.lastgroup) + 1
        i = m.end()
        if kind == "cmd":
            if m.group(kind) not in LATEX_COMMANDS:
                raise AnswerError(msg("parse.latex_command", where=where, command=untrusted(m.group(kind)),
                                      pos=start), pos=start)
            if LATEX_COMMANDS[m.group(kind)] is None:
                continue
            tokens.append(_Token(*LATEX_COMMANDS[m.group(kind)], start))
            continue
        tokens.append(_Token(kind, m.group(kind), start))
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


_SIGNED_POWER_OF_TEN = re.compile(r"(?P<mantissa>\d+\.?\d*|\.\d+)[eE](?P<sign>[+-])(?P<digits>\d+)")
_SUPERSCRIPT_DIGITS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _refuse_ambiguous_e(tokens: list[_Token], where: Msg) -> None:
    """`2e+1` is 20 on its own, but beside the constant e (`e/(2e+1)`) it may mean 2·e + 1: say so.

    Only a power of ten with a sign is ambiguous: `2e1` cannot be a product (a bare number never
    follows a name), and a cell without the constant e keeps reading `-1e-2` as a number."""
    if not any(t.kind == "name" and t.text.lower() == "e" for t in tokens):
        return
    for tok in tokens:
        m = _SIGNED_POWER_OF_TEN.fullmatch(tok.text) if tok.kind == "num" else None
        if m is None:
            continue
        value = float(tok.text)
        if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            return  # "too large" says more than "ambiguous" about 2e+400
        exponent = str(int(m["sign"] + m["digits"]))  # +01 → 1, -02 → -2
        raise AnswerError(msg("parse.ambiguous_e", where=where, token=tok.text, pos=tok.pos,
                              product=f"{m['mantissa']}*e{m['sign']}{m['digits']}",
                              value=np.format_float_positional(value, trim="-"),
                              power=f"{m['mantissa']}×10{exponent.translate(_SUPERSCRIPT_DIGITS)}"),
                          pos=tok.pos)


class _Parser:
    """expr := term (('+'|'-') term)* ;  term := unary (('*'|'/') unary | implicit unary)* ;
    unary := ('+'|'-') unary | power ;  power := atom (('^'|'**') unary)? ;
    atom := number | constant | function group | group | '\\frac' brace brace | '\\sqrt' brace ;
    group := '(' expr ')' | brace ;  brace := '{' expr '}'"""

    def __init__(self, tokens: list[_Token], where: Msg):
        self.tokens, self.i, self.where, self.depth = tokens, 0, where, 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def fail(self, key: str, tok: _Token, **params) -> AnswerError:
        marked = {k: untrusted(v) if isinstance(v, str) else v for k, v in params.items()}  # the learner's text
        return AnswerError(msg(key, where=self.where, pos=tok.pos, **marked), pos=tok.pos)

    def enter(self, tok: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail("parse.too_deep", tok, limit=MAX_DEPTH)

    def checked(self, value: float, tok: _Token, *operands: float) -> float:
        """Cap every value along the way: 1e300*1e300 must not turn into ∞."""
        overflowed = math.isinf(value) and all(math.isfinite(x) for x in operands)
        if overflowed or (math.isfinite(value) and abs(value) > MAX_MAGNITUDE):
            raise self.fail("parse.too_large", tok, limit=f"{MAX_MAGNITUDE:g}")
        return value

    def parse(self) -> float:
        value = self.expr()
        tok = self.peek()
        if tok.kind != "end":
            raise self.fail("parse.unexpected", tok, token=tok.text)
        return value

    def expr(self) -> float:
        value = self.term()
        while self.peek().text in ("+", "-"):
            op = self.take()
            right = self.term()
            value = self.checked(value + right if op.text == "+" else value - right, op, value, right)
        return value

    def term(self) -> float:
        value = self.unary()
        while True:
            tok = self.peek()
            if tok.text in ("*", "/"):
                self.take()
                right = self.unary()
                if tok.text == "*":
                    value = self.checked(value * right, tok, value, right)
                elif right == 0:
                    raise self.fail("parse.undefined", tok)
                else:
                    value = self.checked(value / right, tok, value, right)
            elif tok.kind in ("name", "cmd") or tok.text in ("(", "{"):
                # implicit product: 2sqrt(2), 2e, (1)(2), 2\sqrt{2}; never two bare numbers ("3 1/2", "1..2")
                right = self.unary()
                value = self.checked(value * right, tok, value, right)
            else:
                return value

    def unary(self) -> float:
        tok = self.peek()
        if tok.text in ("+", "-"):
            self.take()
            self.enter(tok)
            value = self.unary()
            self.depth -= 1
            return -value if tok.text == "-" else value
        return self.power()

    def power(self) -> float:
        base = self.atom()
        tok = self.peek()
        if tok.text not in ("^", "**"):
            return base
        self.take()
        self.enter(tok)
        exponent = self.unary()  # right-associative: 2^3^2 = 2^9; -2^2 = -(2^2)
        self.depth -= 1
        try:
            value = math.pow(base, exponent)
        except OverflowError:
            raise self.fail("parse.too_large", tok, limit=f"{MAX_MAGNITUDE:g}") from None
        except ValueError:  # (-8)^(1/3), 0^-1
            raise self.fail("parse.undefined", tok) from None
        return self.checked(value, tok, base, exponent)

    def atom(self) -> float:
        tok = self.take()
        if tok.kind == "num":
            return self.checked(float(tok.text), tok)  # 1e400 reads as inf
        if tok.text in ("(", "{"):
            self.enter(tok)
            value = self.expr()
            self.depth -= 1
            if self.take().text != {"(": ")", "{": "}"}[tok.text]:
                raise self.fail("parse.unclosed" if tok.text == "(" else "parse.unclosed_brace", tok)
            return value
        if tok.kind == "cmd":
            return self.latex_command(tok)
        if tok.kind == "name":
            name = tok.text.lower()
            if name in CONSTANTS:
                return CONSTANTS[name]
            if name in FUNCTIONS:
                if self.peek().text not in ("(", "{"):
                    raise self.fail("parse.function_paren", tok, name=name)
                arg = self.atom()
                try:
                    value = FUNCTIONS[name](arg)
                except OverflowError:  # exp(1000)
                    raise self.fail("parse.too_large", tok, limit=f"{MAX_MAGNITUDE:g}") from None
                except ValueError:  # sqrt(-1), ln(0)
                    raise self.fail("parse.undefined", tok) from None
                return self.checked(value, tok, arg)
            raise self.fail("parse.unknown_name", tok, name=tok.text)
        if tok.kind == "end":
            previous = self.tokens[self.i - 2] if self.i >= 2 else tok
            raise self.fail("parse.missing_operand", previous, token=previous.text)
        raise self.fail("parse.unexpected", tok, token=tok.text)


    def braced(self, command: _Token) -> float:
        """The `{…}` argument of a LaTeX command: `\\frac12` is refused, not guessed."""
        if self.peek().text != "{":
            raise self.fail("parse.latex_braces", command, command=command.text)
        self.enter(command)
        value = self.atom()
        self.depth -= 1
        return value

    def latex_command(self, tok: _Token) -> float:
        """\\frac{a}{b} (also \\dfrac, \\tfrac) and \\sqrt{x}."""
        if tok.text == r"\sqrt":
            arg = self.braced(tok)
            if arg < 0:
                raise self.fail("parse.undefined", tok)
            return self.checked(math.sqrt(arg), tok, arg)
        numerator = self.braced(tok)
        denominator = self.braced(tok)
        if denominator == 0:
            raise self.fail("parse.undefined", tok)
        return self.checked(numerator / denominator, tok, numerator, denominator)


def _normalised_within(text: str, limit: int, where: Msg, lone: bool = False) -> str:
    """`text` normalised, when it has at most `limit` characters both as typed and once normalised
    (NFKC writes some characters out: ﷺ becomes 18, so the limit is checked after it too)."""
    if len(text) > limit:
        raise AnswerError(msg("parse.too_long", where=where, length=len(text), limit=limit))
    if not unicodedata.is_normalized("NFKC", text):  # (a fast test) some characters may be written out
        at_least = _nfkc_length_at_least(text, limit)
        if at_least > limit:
            raise AnswerError(msg("parse.too_long_normalised", where=where, length=at_least, typed=len(text),
                                  limit=limit))
    normalised = normalise(text, lone=lone)
    if len(normalised) > limit:
        raise AnswerError(msg("parse.too_long_normalised", where=where, length=len(normalised), typed=len(text),
                              limit=limit))
    return normalised


_CHUNK = 64


def _nfkc_length_at_least(text: str, limit: int) -> int:
    """A lower bound of len(NFKC(text)), exact when it is at most `limit`, found chunk by chunk so
    that a text far beyond the limit costs only its first chunks. Joining two chunks can compose at
    most a few characters across their boundary (e + ◌́, Hangul jamo), hence the margin."""
    total = 0
    for start in range(0, len(text), _CHUNK):
        total += len(unicodedata.normalize("NFKC", text[start:start + _CHUNK]))
        margin = 3 * (start // _CHUNK)
        if total - margin > limit:
            return total - margin
    return len(unicodedata.normalize("NFKC", text))


def answer_chars(answer) -> int:
    """The characters of an answer as typed: a text, a grid of cell texts, or {part: either}."""
    if answer is None:
        return 0
    if isinstance(answer, str):
        return len(answer)
    if isinstance(answer, dict):
        return sum(answer_chars(v) for v in answer.values())
    if isinstance(answer, (list, tuple)):
        return sum(answer_chars(v) for v in answer)
    return 0


def run_budget(answers) -> Msg | None:
    """What is wrong with the answers of one run (every box of a submit) taken together: a message
    when their text exceeds MAX_RUN_CHARS, else None. Checked before anything is parsed."""
    total = answer_chars(answers)
    if total > MAX_RUN_CHARS:
        return msg("parse.run_too_long", length=total, limit=MAX_RUN_CHARS)
    return None


# a plain decimal (what nearly every typed cell is): the grammar reads it as float(text) exactly, within
# MAX_MAGNITUDE by its 12 whole digits, so the tokens and the parser are skipped
_PLAIN_DECIMAL = re.compile(r"[ \t]*[+-]?(?:\d{1,12}(?:\.\d{0,12})?|\.\d{1,12})[ \t]*")


def parse_number(text: str, where: Msg | None = None) -> float:
    """One cell's text → float (−inf allowed). Raises AnswerError naming `where` and the character."""
    if isinstance(text, str) and _PLAIN_DECIMAL.fullmatch(text):
        return float(text)
    where = where or msg("where.answer")
    if text is None or not str(text).strip():
        raise AnswerError(msg("parse.empty", where=where))
    text = _normalised_within(str(text), MAX_CELL_CHARS, where, lone=True)
    comma = _GLUED_COMMA.search(text)
    if comma is not None:  # 1,5+1 or e^0,5: a decimal comma where only a lone number may have one
        raise AnswerError(msg("parse.decimal_comma", where=where, cell=untrusted(text.strip()),
                              fixed=untrusted(_GLUED_COMMA.sub(".", text).strip())), pos=comma.start() + 1)
    tokens = _tokenize(text, where)
    _refuse_ambiguous_e(tokens, where)
    value = _Parser(tokens, where).parse()
    if math.isnan(value):
        raise AnswerError(msg("parse.undefined", where=where))
    if math.isfinite(value) and abs(value) > MAX_MAGNITUDE:
        raise AnswerError(msg("parse.too_large", where=where, limit=f"{MAX_MAGNITUDE:g}"))
    return value


# ---------------------------------------------------------------- whole matrices

_OPERATOR_END = tuple("+-*/^(")
_OPERATOR_START = tuple("*/^)")


def _split_top(text: str, seps: str) -> list[str]:
    """Split on any of `seps` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch in seps and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _split_cells(row: str) -> list[str]:
    """Cells of one row: by commas when there are any, else by spaces as in MATLAB:
    `1 -1` is two cells, `1 - 1` and `e^2 / 3` are one."""
    by_comma = _split_top(row, ",")
    if len(by_comma) > 1:
        return [c.strip() for c in by_comma]
    chunks = [c for c in _split_top(row, " \t") if c]
    cells: list[str] = []
    for chunk in chunks:
        joins_previous = cells and (
            cells[-1].endswith(_OPERATOR_END) or chunk.startswith(_OPERATOR_START)
            or chunk in ("+", "-") or cells[-1].lower().endswith(tuple(FUNCTIONS)) and chunk.startswith("(")
        )
        if joins_previous:
            cells[-1] = cells[-1] + " " + chunk
        else:
            cells.append(chunk)
    return cells


_SPACED_COMMA = re.compile(r",\s|\s,")
_MARK = "\x00"  # stands in for a glued comma while a row is split: no answer can contain it


def _cell_where(where: Msg | None, row: int, col: int) -> Msg:
    """Where a cell is, 1-based: in the named box when there is one ("Scores, row 2, column 1")."""
    if where is None:
        return msg("where.cell", row=row, col=col)
    return msg("where.box_cell", part=where, row=row, col=col)


def _refuse_decimal_comma(row: str, r: int, where: Msg | None = None) -> None:
    """`0,5 0,25` and `0,33, 0,67` mix decimal commas with separators: refuse them, naming the entry.

    A row with glued commas only (`1,2`) is two entries, as always; it is a decimal comma when the row
    also separates entries by spaces or by a comma with a space beside it."""
    if _MARK in row or not _GLUED_COMMA.search(row):
        return
    marked = _GLUED_COMMA.sub(_MARK, row)
    cells = _split_cells(marked)
    if not _SPACED_COMMA.search(row) and len(cells) < 2:
        return
    c, cell = next((c, cell) for c, cell in enumerate(cells, start=1) if _MARK in cell)
    raise AnswerError(msg("parse.decimal_comma", where=_cell_where(where, r, c),
                          cell=untrusted(cell.replace(_MARK, ",")), fixed=untrusted(cell.replace(_MARK, "."))),
                      row=r, col=c)


def _rows_of(text: str, where: Msg) -> list[str]:
    """Row texts of `[[1, 2], [3, 4]]`, `[1 2; 3 4]`, `1 2; 3 4` or one row per line."""
    stripped = text.strip()
    if "[" not in stripped and "]" not in stripped:
        return [r for r in _split_top(stripped, ";\n") if r.strip()]
    rows, depth, current = [], 0, None
    for i, ch in enumerate(stripped):
        if ch == "[":
            depth += 1
            if depth == 2:
                current = []
            elif depth > 2:
                raise AnswerError(msg("parse.brackets", where=where, pos=i + 1), pos=i + 1)
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise AnswerError(msg("parse.brackets", where=where, pos=i + 1), pos=i + 1)
            if depth == 1 and current is not None:
                rows.append("".join(current))
                current = None
        elif depth == 2:
            current.append(ch)
    if depth != 0:
        raise AnswerError(msg("parse.brackets", where=where, pos=len(stripped)), pos=len(stripped))
    if rows:
        return rows
    inner = stripped.strip("[] \n\t")  # one bracket level: [1, 2, 3] or [1 2; 3 4]
    return [r for r in _split_top(inner, ";\n") if r.strip()]


def parse_answer(text: str, where: Msg | None = None) -> np.ndarray:
    """A whole matrix as text → 2-D float array. A lone number gives a 1×1 matrix."""
    return _read_matrix(text, where)


# ---------------------------------------------------------------- a matrix pasted as LaTeX

_LATEX_MATRIX = re.compile(r"\\begin|\\\\|&")  # \begin{…}, a row break \\ or a column separator &
_ENVIRONMENT = re.compile(r"\\(?P<side>begin|end)\s*\{(?P<name>[^{}]*)\}")
MATRIX_ENVIRONMENTS = ("matrix", "pmatrix", "bmatrix", "Bmatrix", "smallmatrix", "array",
                       "matrix*", "pmatrix*", "bmatrix*", "Bmatrix*")
# what may surround the environment: maths delimiters and the brackets of \left[ … \right]
_LATEX_WRAPPING = re.compile(r"(?:\s+|\$|\\\[|\\\]|\\\(|\\\)|\\left\s*[\[(]|\\right\s*[\])])*")
_COLUMN_SPEC = re.compile(r"\s*(?:\{[lcr|\s]*\}|\[[lcr]\])")  # array's {cc}, matrix*'s [r]
_ROW_SPACING = re.compile(r"\s*\[[^\]\[{}\\]{0,20}\]")  # \\[2pt]


def _wrapping_end(text: str, start: int, end: int) -> int:
    """Where the text from `start` stops being delimiters (end when it is delimiters only)."""
    return _LATEX_WRAPPING.match(text, start, end).end()


def _latex_body(text: str, where: Msg) -> tuple[str, int]:
    """The inside of the one matrix environment of `text` (or all of `text` when it has none, as in
    `1 & 2 \\\\ 3 & 4`), and where that inside starts (0-based)."""
    found = list(_ENVIRONMENT.finditer(text))
    if not found:
        return text, 0
    begin = found[0]
    if begin["side"] != "begin" or begin["name"].strip() not in MATRIX_ENVIRONMENTS:
        raise AnswerError(msg("parse.latex_environment", where=where, name=untrusted(begin.group()),
                              pos=begin.start() + 1), pos=begin.start() + 1)
    if len(found) > 1 and found[1]["side"] == "begin":  # a matrix inside the matrix
        inner = found[1]
        raise AnswerError(msg("parse.latex_outside", where=where, text=untrusted(inner.group()),
                              pos=inner.start() + 1), pos=inner.start() + 1)
    if len(found) == 1 or found[1]["name"] != begin["name"]:
        raise AnswerError(msg("parse.latex_unclosed", where=where, name=untrusted(begin.group()),
                              pos=begin.start() + 1), pos=begin.start() + 1)
    if len(found) > 2:  # a second matrix, or one inside another
        extra = found[2]
        raise AnswerError(msg("parse.latex_outside", where=where, text=untrusted(extra.group()),
                              pos=extra.start() + 1), pos=extra.start() + 1)
    end = found[1]
    for start, stop in ((0, begin.start()), (end.end(), len(text))):
        stray = _wrapping_end(text, start, stop)
        if stray < stop:  # "A = \begin{bmatrix}…": only the matrix may be pasted
            raise AnswerError(msg("parse.latex_outside", where=where, text=untrusted(text[stray:stop].strip()[:20]),
                                  pos=stray + 1), pos=stray + 1)
    inside = begin.end()
    if begin["name"].strip() in ("array", "matrix*", "pmatrix*", "bmatrix*", "Bmatrix*"):
        spec = _COLUMN_SPEC.match(text, inside)
        inside = spec.end() if spec else inside
    return text[inside:end.start()], inside


def _latex_rows(text: str, where: Msg) -> list[list[str]]:
    """Cell texts of a LaTeX matrix: rows split at `\\\\`, cells at `&`, both outside braces."""
    body, offset = _latex_body(text, where)
    rows: list[list[str]] = [[]]
    depth, start, i = 0, 0, 0
    while i < len(body):
        ch = body[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise AnswerError(msg("parse.brackets", where=where, pos=offset + i + 1), pos=offset + i + 1)
        elif depth == 0 and ch == "&":
            rows[-1].append(body[start:i])
            start = i + 1
        elif depth == 0 and body.startswith("\\\\", i):
            rows[-1].append(body[start:i])
            spacing = _ROW_SPACING.match(body, i + 2)
            i = spacing.end() if spacing else i + 2
            start = i
            rows.append([])
            continue
        elif ch == "\\":
            i += 2  # a command's backslash and its first character (\{ is not a brace)
            continue
        i += 1
    if depth != 0:
        raise AnswerError(msg("parse.brackets", where=where, pos=offset + len(body)), pos=offset + len(body))
    rows[-1].append(body[start:])
    rows = [[cell.strip() for cell in row] for row in rows]
    return [row for row in rows if any(row)]  # blank rows (a trailing \\\\) are dropped


def _read_matrix(text: str, where: Msg | None = None) -> np.ndarray:
    """parse_answer's general reading: any text the grammar accepts, or the AnswerError saying why not."""
    # the box it was typed in, when the caller names one (a Msg, or plain text)
    box = None if where is None or getattr(where, "key", None) == "where.answer" else where
    where = where or msg("where.answer")
    if text is None or not str(text).strip():
        raise AnswerError(msg("parse.empty", where=where))
    text = str(text)
    normalised = _normalised_within(text, MAX_MATRIX_CHARS, where)
    if _LONE_COMMA_NUMBER.match(normalised):
        return np.array([[parse_number(text, where)]])
    if _LATEX_MATRIX.search(normalised):
        rows = _latex_rows(normalised, where)
    else:
        row_texts = [r.strip() for r in _rows_of(normalised, where)]
        for r, row in enumerate((row for row in row_texts if row), start=1):
            _refuse_decimal_comma(row, r, box)
        rows = [_split_cells(row) for row in row_texts]
        rows = [r for r in rows if r and any(c for c in r)]
    if not rows:
        raise AnswerError(msg("parse.no_rows", where=where))
    cells = sum(len(r) for r in rows)
    if cells > MAX_CELLS:
        raise AnswerError(msg("parse.too_many_cells", where=where, cells=cells, limit=MAX_CELLS))
    for r, row in enumerate(rows, start=1):
        if len(row) != len(rows[0]):
            ragged = {"row": r, "got": len(row), "expected": len(rows[0])}
            raise AnswerError(msg("parse.ragged", **ragged) if box is None else
                              msg("parse.ragged_in", where=box, **ragged), row=r)
    values = np.empty((len(rows), len(rows[0])))
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            if _PLAIN_DECIMAL.fullmatch(cell):  # (a fast path) no message to name the cell is needed
                values[r, c] = float(cell)
                continue
            try:
                values[r, c] = parse_number(cell, _cell_where(box, r + 1, c + 1))
            except AnswerError as err:
                err.row, err.col = r + 1, c + 1
                raise
    return values


def parse_grid(cells, part_label: str | Msg | None = None) -> tuple[np.ndarray, dict[tuple[int, int], AnswerError]]:
    """A grid of cell texts → (values with NaN where unreadable, {(row, col): error}) (0-based keys)."""
    grid = [list(row) for row in cells]
    values = np.full((len(grid), max((len(r) for r in grid), default=0)), np.nan)
    errors: dict[tuple[int, int], AnswerError] = {}
    for r, row in enumerate(grid):
        for c in range(values.shape[1]):
            text = row[c] if c < len(row) else None  # a short row's missing cells are empty, not NaN
            if isinstance(text, str) and _PLAIN_DECIMAL.fullmatch(text):  # (a fast path) no message needed
                values[r, c] = float(text)
                continue
            where = (msg("where.part_cell", part=part_label, row=r + 1, col=c + 1) if part_label
                     else msg("where.cell", row=r + 1, col=c + 1))
            try:
                values[r, c] = parse_number(text, where)
            except AnswerError as err:
                err.row, err.col = r + 1, c + 1
                errors[(r, c)] = err
    return values, errors
