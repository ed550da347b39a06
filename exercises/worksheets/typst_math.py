"""LaTeX math, as exercises.rendering.latex writes it, in Typst math: the answer key prints the very lines the
screen shows (exercises.solve), so there is one derivation and two typesetters.

    latex_to_typst(r"\\frac{e^{1}}{e^{0} + e^{1}} \\approx 0.73")  ->  'frac(e^(1), e^(0) + e^(1)) approx 0.73'

Only the vocabulary of exercises.rendering.latex and the kinds is known (fractions, roots, matrices, aligned
lines, cases, \\left…\\right, operators, Greek letters …); anything else raises UnsupportedLatex, so a
new construct is noticed by the tests instead of printing wrong. The input is our own LaTeX, never
user text; every letter is set apart (Typst reads "ij" as one name), and commas, semicolons, slashes
and quotes are escaped (they mean something in Typst math).
"""

from __future__ import annotations

import re

from ..i18n import escape


def typst_string(text: str) -> str:
    """A Typst string literal: user text reaches the document as text, never as markup or code
    (exercises.i18n.escape.typst, the one rule)."""
    return escape.typst(text)


class UnsupportedLatex(ValueError):
    """A LaTeX construct this converter does not know."""


# a command with a verbatim argument (\text{rows}, \begin{bmatrix}) is one token, so spaces can go
_RAW = ("text", "textrm", "operatorname", "mathrm", "mathbb", "begin", "end")
_TOKEN = re.compile(r"\\(?:" + "|".join(_RAW) + r")\{[^{}]*\}|\\[A-Za-z]+|\\.|\d+(?:\.\d+)?|\s+|.", re.S)
_RAW_TOKEN = re.compile(r"\\(\w+)\{(.*)\}", re.S)
_END = r"\end"  # in a stop list: any \end{…}
_END_BRACE = _END + "{"

_SYMBOLS = {
    "partial": "partial", "approx": "approx", "cdot": "dot", "sum": "sum", "prod": "product", "top": "top",
    "Rightarrow": "=>", "Leftrightarrow": "<=>", "rightarrow": "->", "to": "->", "mapsto": "|->",
    "infty": "infinity", "times": "times", "le": "<=", "leq": "<=", "ge": ">=", "geq": ">=", "ne": "!=",
    "neq": "!=", "odot": "dot.o", "otimes": "times.o", "in": "in", "ln": "ln", "log": "log", "exp": "exp",
    "max": "max", "min": "min", "sin": "sin", "cos": "cos", "ldots": "dots.h", "cdots": "dots.c",
    "dots": "dots.h", "pm": "plus.minus", "circ": "circle.small", "nabla": "nabla", "ell": "ell",
    "quad": "quad", "qquad": "wide", ",": "thin", ";": "med", ":": "med", " ": "space", "!": "",
    "{": "\\{", "}": "\\}", "|": "||", "%": "%", "_": "\\_", "&": "\\&", "#": "\\#", "$": "\\$",
    "hline": "", "lvert": "|", "rvert": "|", "equiv": "equiv", "sim": "tilde.op", "propto": "prop",
    "forall": "forall", "exists": "exists", "cdotp": "dot",
}
_SPACES = {"quad": 2, "qquad": 4, ",": 0.3, ";": 0.5, ":": 0.5, " ": 0.5, "!": 0, "hline": 0}  # widths
_GREEK = {"alpha", "beta", "gamma", "delta", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi",
          "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "Gamma", "Delta", "Theta",
          "Lambda", "Xi", "Pi", "Sigma", "Phi", "Psi", "Omega"}
_GREEK_VARIANTS = {"epsilon": "epsilon.alt", "varepsilon": "epsilon", "varphi": "phi", "phi": "phi.alt",
                   "vartheta": "theta.alt"}
_ACCENTS = {"tilde": "tilde", "hat": "hat", "bar": "overline", "overline": "overline", "vec": "arrow",
            "mathbf": "bold", "boldsymbol": "bold", "mathit": "italic", "mathcal": "cal", "dot": "dot"}
_ESCAPED = {",": "\\,", ";": "\\;", "/": "\\/", '"': '\\"', "#": "\\#", "$": "\\$", "~": "\\~", "@": "\\@",
            "*": "\\*", "\\": "\\\\", "'": "'", "`": "\\`"}
_MATRICES = {"bmatrix": '"["', "pmatrix": '"("', "matrix": "#none", "vmatrix": '"|"', "Bmatrix": '"{"'}
_DELIMITERS = {"(": "(", ")": ")", "[": "[", "]": "]", "|": "|", "\\{": "{", "\\}": "}", "\\|": "||",
               "\\lvert": "|", "\\rvert": "|", "\\langle": "angle.l", "\\rangle": "angle.r"}


class Math(str):
    """Typst math text with a rough width, in digits (about half an em): wide lines get shrunk to fit."""

    width: float

    def __new__(cls, text: str, width: float) -> Math:
        made = super().__new__(cls, text)
        made.width = float(width)
        return made


def _width(piece: str | float) -> float:
    kind = type(piece)
    if kind is Math:
        return piece.width  # type: ignore[union-attr]
    if kind is str:
        return float(len(piece))  # type: ignore[arg-type]
    if isinstance(piece, (int, float)):
        return float(piece)
    return piece.width if isinstance(piece, Math) else float(len(piece))


def _row(cells: list[str], gap: float = 0.0) -> float:
    return sum(_width(c) for c in cells) + gap * max(len(cells) - 1, 0)


def latex_to_typst(latex: str) -> Math:
    """Typst math for a LaTeX math string (without the $ delimiters), with its rough width (Math.width);
    raises UnsupportedLatex."""
    parser = _Parser([t for t in _TOKEN.findall(latex) if not t.isspace()])
    out = parser.sequence(stop=())
    if parser.i < parser.end:
        raise UnsupportedLatex(f"unexpected {parser.tokens[parser.i]!r}")
    return out


class _Parser:
    def __init__(self, tokens: list[str]):
        self.end = len(tokens)
        self.tokens: list[str | None] = [*tokens, None]  # None past the end: peek needs no bounds check
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i]

    def take(self) -> str:
        token = self.tokens[self.i]
        if token is None:
            raise UnsupportedLatex("unexpected end")
        self.i += 1
        return token

    def expect(self, token: str) -> None:
        got = self.take()
        if got != token:
            raise UnsupportedLatex(f"expected {token!r}, found {got!r}")

    def sequence(self, stop: tuple[str, ...]) -> Math:
        """Pieces up to (not including) a token in `stop` or a closing brace, joined by spaces."""
        pieces: list[str] = []

        def joined() -> Math:
            return Math(" ".join(p for p in pieces if p), _row(pieces))

        tokens, ends = self.tokens, _END in stop
        while True:
            token = tokens[self.i]
            if token is None or token == "}" or token in stop or (ends and token.startswith(_END_BRACE)):
                return joined()
            if token in ("^", "_"):
                self.take()
                if not pieces:
                    pieces.append(Math('""', 0))
                script = self.script()
                pieces[-1] = Math(pieces[-1] + token + script, _width(pieces[-1]) + 0.7 * _width(script))
                continue
            if token == r"\displaystyle":
                self.take()
                rest = self.sequence(stop)
                pieces.append(Math(f"display({rest})", _width(rest)) if rest else "")
                return joined()
            pieces.append(self.atom())

    def argument(self) -> str:
        """One argument of a command: a {group} or a single token."""
        if self.peek() == "{":
            self.take()
            inner = self.sequence(stop=())
            self.expect("}")
            return inner
        return self.atom()

    def script(self) -> Math:
        """A sub- or superscript: (…) unless it is one letter or one whole number."""
        arg = self.argument()
        return Math(arg if re.fullmatch(r"[A-Za-z]|\d+", arg) else f"({arg})", _width(arg))

    def atom(self) -> Math:
        token = self.take()
        if token == "{":
            inner = self.sequence(stop=())
            self.expect("}")
            return inner
        if token.isalpha() and len(token) == 1:
            return token
        if token[0].isdigit():
            return token
        if token.startswith("\\"):
            raw = _RAW_TOKEN.fullmatch(token)
            if raw is not None and raw.group(1) in _RAW:
                return self.command(raw.group(1), raw.group(2))
            return self.command(token[1:])
        if token in _ESCAPED:
            return Math(_ESCAPED[token], 0.6)
        if token in "+-=<>()[]|.:!?":
            return Math(token, 2 if token in "+-=<>" else 0.6)  # with the spaces around it
        if not token.isascii():
            return Math(token, 2)  # a Unicode symbol (×, −) is one glyph in Typst too
        raise UnsupportedLatex(f"unexpected {token!r}")

    def command(self, name: str, raw: str | None = None) -> Math:
        """A command; `raw` is the verbatim argument of a _RAW command."""
        if name in _RAW and raw is None:
            raise UnsupportedLatex(f"\\{name} without a plain {{…}} argument")
        if name == "frac" or name == "dfrac" or name == "tfrac":
            top, bottom = self.argument(), self.argument()
            return Math(f"frac({top}, {bottom})", max(_width(top), _width(bottom)) + 0.5)
        if name == "sqrt":
            inner = self.argument()
            return Math(f"sqrt({inner})", _width(inner) + 1.5)
        if name in _ACCENTS:
            inner = self.argument()
            return Math(f"{_ACCENTS[name]}({inner})", _width(inner))
        if name == "text" or name == "textrm":
            return Math(typst_string(raw), len(raw))
        if name == "mathrm" or name == "operatorname":
            text = raw
            if not re.fullmatch(r"[A-Za-z0-9 ]+", text):
                raise UnsupportedLatex(f"\\{name}{{{text}}}")
            shown = f"op({typst_string(text)})" if name == "operatorname" else \
                (f"upright({text})" if len(text) == 1 else f"upright({typst_string(text)})")
            return Math(shown, len(text))
        if name == "mathbb":
            text = raw
            if not re.fullmatch(r"[A-Z]", text):
                raise UnsupportedLatex(f"\\mathbb{{{text}}}")
            return Math(text * 2, 1.2)
        if name == "left":
            return self.left_right()
        if name == "begin":
            return self.environment(raw)
        if name == "end":
            raise UnsupportedLatex(f"\\end{{{raw}}} without its \\begin")
        if name == "\\":
            return Math("\\", 0)  # a line break outside aligned lines
        if name in _SYMBOLS:
            return Math(_SYMBOLS[name], _SPACES.get(name, 2))
        if name in _GREEK_VARIANTS:
            return Math(_GREEK_VARIANTS[name], 1.2)
        if name in _GREEK:
            return Math(name, 1.2)
        raise UnsupportedLatex(f"\\{name}")

    def delimiter(self) -> str:
        token = self.take()
        if token == ".":
            return ""
        if token not in _DELIMITERS:
            raise UnsupportedLatex(f"delimiter {token!r}")
        return _DELIMITERS[token]

    def left_right(self) -> Math:
        opening = self.delimiter()
        inner = self.sequence(stop=(r"\right",))
        self.expect(r"\right")
        closing = self.delimiter()
        if not opening or not closing or opening.isalpha() or closing.isalpha():
            return Math(f"lr({opening} {inner} {closing})", _width(inner) + 1.5)
        return Math(f"lr({opening}{inner}{closing})", _width(inner) + 1.5)

    def rows(self, env: str) -> list[list[str]]:
        """Rows of cells up to \\end{env}: cells split at &, rows at \\\\."""
        rows: list[list[str]] = [[]]
        while True:
            rows[-1].append(self.sequence(stop=("&", r"\\", _END)))
            token = self.take()
            if token == "&":
                continue
            if token == r"\\":
                rows.append([])
                continue
            if token.startswith(_END + "{"):
                if token != rf"\end{{{env}}}":
                    raise UnsupportedLatex(f"\\end of another environment than {env}")
                if rows[-1] == [""] and len(rows) > 1:
                    rows.pop()  # a trailing \\
                return rows
            raise UnsupportedLatex(f"unexpected {token!r} in {env}")

    def environment(self, env: str) -> Math:
        rows = self.rows(env)
        if env in _MATRICES:
            body = "; ".join(", ".join(cell or "zws" for cell in row) for row in rows)
            columns = [max(_width(row[j]) for row in rows if j < len(row)) for j in range(max(map(len, rows)))]
            return Math(f"mat(delim: {_MATRICES[env]}, {body})", _row(columns, gap=1.8) + 2)
        if env in ("aligned", "align", "align*", "gathered"):
            return Math(" \\ ".join(" & ".join(row) for row in rows), max(_row(row) for row in rows))
        if env == "cases":
            body = ", ".join(" & quad ".join(row) for row in rows)  # the gap between value and condition
            return Math(f"cases({body})", max(_row(row, 2) for row in rows) + 2)
        raise UnsupportedLatex(f"environment {env}")
