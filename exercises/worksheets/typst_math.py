"""LaTeX math, as exercises.latex writes it, in Typst math: the answer key prints the very lines the
screen shows (exercises.solve), so there is one derivation and two typesetters.

    latex_to_typst(r"\\frac{e^{1}}{e^{0} + e^{1}} \\approx 0.73")  ->  'frac(e^(1), e^(0) + e^(1)) approx 0.73'

Only the vocabulary of exercises.latex and the kinds is known (fractions, roots, matrices, aligned
lines, cases, \\left…\\right, operators, Greek letters …); anything else raises UnsupportedLatex, so a
new construct is noticed by the tests instead of printing wrong. The input is our own LaTeX, never
user text; every letter is set apart (Typst reads "ij" as one name), and commas, semicolons, slashes
and quotes are escaped (they mean something in Typst math).
"""

from __future__ import annotations

import re

from .model import CONTROL


def typst_string(text: str) -> str:
    """A Typst string literal: user text reaches the document as text, never as markup or code."""
    text = CONTROL.sub(" ", str(text))
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "") + '"'


class UnsupportedLatex(ValueError):
    """A LaTeX construct this converter does not know."""


_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\d+(?:\.\d+)?|\s+|.", re.S)

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


def latex_to_typst(latex: str) -> str:
    """Typst math for a LaTeX math string (without the $ delimiters); raises UnsupportedLatex."""
    parser = _Parser([t for t in _TOKEN.findall(latex)])
    out = parser.sequence(stop=())
    if parser.i < len(parser.tokens):
        raise UnsupportedLatex(f"unexpected {parser.tokens[parser.i]!r}")
    return out


class _Parser:
    def __init__(self, tokens: list[str]):
        self.tokens = tokens
        self.i = 0

    def peek(self) -> str | None:
        while self.i < len(self.tokens) and self.tokens[self.i].isspace():
            self.i += 1
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise UnsupportedLatex("unexpected end")
        self.i += 1
        return token

    def expect(self, token: str) -> None:
        got = self.take()
        if got != token:
            raise UnsupportedLatex(f"expected {token!r}, found {got!r}")

    def raw_group(self) -> str:
        """The text of a {…} group, unparsed (\\text{rows}, \\begin{bmatrix})."""
        self.expect("{")
        depth, out = 1, []
        while self.i < len(self.tokens):
            token = self.tokens[self.i]
            self.i += 1
            depth += token == "{"
            depth -= token == "}"
            if depth == 0:
                return "".join(out)
            out.append(token)
        raise UnsupportedLatex("unclosed group")

    def sequence(self, stop: tuple[str, ...]) -> str:
        """Pieces up to (not including) a token in `stop` or a closing brace, joined by spaces."""
        pieces: list[str] = []
        while True:
            token = self.peek()
            if token is None or token in stop or token == "}":
                return " ".join(p for p in pieces if p)
            if token in ("^", "_"):
                self.take()
                if not pieces:
                    pieces.append('""')
                pieces[-1] += token + self.script()
                continue
            if token == r"\displaystyle":
                self.take()
                rest = self.sequence(stop)
                pieces.append(f"display({rest})" if rest else "")
                return " ".join(p for p in pieces if p)
            pieces.append(self.atom())

    def argument(self) -> str:
        """One argument of a command: a {group} or a single token."""
        if self.peek() == "{":
            self.take()
            inner = self.sequence(stop=())
            self.expect("}")
            return inner
        return self.atom()

    def script(self) -> str:
        """A sub- or superscript: (…) unless it is one letter or one whole number."""
        arg = self.argument()
        return arg if re.fullmatch(r"[A-Za-z]|\d+", arg) else f"({arg})"

    def atom(self) -> str:
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
            return self.command(token[1:])
        if token in _ESCAPED:
            return _ESCAPED[token]
        if token in "+-=<>()[]|.:!?":
            return token
        if not token.isascii():
            return token  # a Unicode symbol (×, −) is one glyph in Typst too
        raise UnsupportedLatex(f"unexpected {token!r}")

    def command(self, name: str) -> str:
        if name == "frac" or name == "dfrac" or name == "tfrac":
            return f"frac({self.argument()}, {self.argument()})"
        if name == "sqrt":
            return f"sqrt({self.argument()})"
        if name in _ACCENTS:
            return f"{_ACCENTS[name]}({self.argument()})"
        if name == "text" or name == "textrm":
            return typst_string(self.raw_group())
        if name == "mathrm" or name == "operatorname":
            text = self.raw_group()
            if not re.fullmatch(r"[A-Za-z0-9 ]+", text):
                raise UnsupportedLatex(f"\\{name}{{{text}}}")
            return f"op({typst_string(text)})" if name == "operatorname" else \
                (f"upright({text})" if len(text) == 1 else f"upright({typst_string(text)})")
        if name == "mathbb":
            text = self.raw_group()
            if not re.fullmatch(r"[A-Z]", text):
                raise UnsupportedLatex(f"\\mathbb{{{text}}}")
            return text * 2
        if name == "left":
            return self.left_right()
        if name == "begin":
            return self.environment(self.raw_group())
        if name == "\\":
            return "\\"  # a line break outside aligned lines
        if name in _SYMBOLS:
            return _SYMBOLS[name]
        if name in _GREEK_VARIANTS:
            return _GREEK_VARIANTS[name]
        if name in _GREEK:
            return name
        raise UnsupportedLatex(f"\\{name}")

    def delimiter(self) -> str:
        token = self.take()
        if token == ".":
            return ""
        if token not in _DELIMITERS:
            raise UnsupportedLatex(f"delimiter {token!r}")
        return _DELIMITERS[token]

    def left_right(self) -> str:
        opening = self.delimiter()
        inner = self.sequence(stop=(r"\right",))
        self.expect(r"\right")
        closing = self.delimiter()
        if not opening or not closing or opening.isalpha() or closing.isalpha():
            return f"lr({opening} {inner} {closing})"
        return f"lr({opening}{inner}{closing})"

    def rows(self, env: str) -> list[list[str]]:
        """Rows of cells up to \\end{env}: cells split at &, rows at \\\\."""
        rows: list[list[str]] = [[]]
        while True:
            rows[-1].append(self.sequence(stop=("&", r"\\", r"\end")))
            token = self.take()
            if token == "&":
                continue
            if token == r"\\":
                rows.append([])
                continue
            if token == r"\end":
                if self.raw_group() != env:
                    raise UnsupportedLatex(f"\\end of another environment than {env}")
                if rows[-1] == [""] and len(rows) > 1:
                    rows.pop()  # a trailing \\
                return rows
            raise UnsupportedLatex(f"unexpected {token!r} in {env}")

    def environment(self, env: str) -> str:
        if env in _MATRICES:
            body = "; ".join(", ".join(cell or "zws" for cell in row) for row in self.rows(env))
            return f"mat(delim: {_MATRICES[env]}, {body})"
        if env in ("aligned", "align", "align*", "gathered"):
            return " \\ ".join(" & ".join(row) for row in self.rows(env))
        if env == "cases":
            return "cases(" + ", ".join(" & ".join(row) for row in self.rows(env)) + ")"
        raise UnsupportedLatex(f"environment {env}")
