"""Shapes through attention: each answer is (rows, columns) of one matrix, as a 1×2 row.

    Q: n × d_k    Kᵀ: d_k × n    S, A: n × n    O (one head): n × d_v
    concat: n × h·d_v    W_O: h·d_v × d_model

Q, Kᵀ and O are one head's, and each part says so and asks for the pair (rows, columns), so the
n × h·d_k of all heads' queries side by side (Q before it is split into heads) is a named mistake, and so
is n × d_model, X's own width, where d_model is not h·d_k (level 3).
The sizes are drawn all different, so every wrong order (a transposed shape, d_k × d_k for the
scores, heads stacked as rows …) is a different answer that diagnose() can name.
"""

from __future__ import annotations

import numpy as np

from ... import solutions
from ...core.contract import HomeStage
from ...core.draft import Draft
from ...core.model import Exercise, Part
from ...core.numbers import choice
from ...i18n import msg, plural
from ...rendering import latex as L

ID = "shapes"
ORDER = 90
VERSION = 2
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ()
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("shape_q_all_heads", "shape_q_d_model", "shape_transposed", "shape_scores_inner", "shape_concat_stacked",
            "shape_concat_one_head", "shape_output_dk")

SINGLE_HEAD = ["Q", "K_T", "scores", "A", "O"]
PARTS_BY_LEVEL = {1: SINGLE_HEAD, 2: SINGLE_HEAD + ["concat", "W_O"], 3: SINGLE_HEAD + ["concat", "W_O"]}
TOKENS = {1: (3, 4, 5), 2: (3, 5, 6, 10), 3: (5, 6, 7, 10, 12)}
HEADS = {1: (1,), 2: (2, 4, 8), 3: (2, 3, 4, 8)}
KEY_WIDTHS = {1: (2, 4, 8), 2: (2, 4, 8, 16), 3: (4, 8, 16, 64)}


def shapes_of(n: int, d_model: int, h: int, d_k: int, d_v: int) -> dict[str, tuple[int, int]]:
    """The right (rows, columns) of every matrix of the forward pass."""
    return {"Q": (n, d_k), "K_T": (d_k, n), "scores": (n, n), "A": (n, n), "O": (n, d_v),
            "concat": (n, h * d_v), "W_O": (h * d_v, d_model)}


def _sizes(rng: np.random.Generator, level: int) -> dict[str, int]:
    """n, d_model, h, d_k, d_v drawn until every wrong order gives a different answer."""
    while True:
        n, h, d_k = choice(rng, TOKENS[level]), choice(rng, HEADS[level]), choice(rng, KEY_WIDTHS[level])
        d_v = d_k if level < 3 else choice(rng, KEY_WIDTHS[level])  # level 3: d_v may differ from d_k
        d_model = h * d_k if level < 3 else h * d_k * choice(rng, (1, 2))
        apart = n not in (d_k, d_v, h * d_v)
        if level == 3:  # W_O is not square and d_v is not d_k: their mix-ups show too
            apart = apart and d_v != d_k and d_model not in (h * d_v, n)
        if apart:
            return {"n": n, "d_model": d_model, "h": h, "d_k": d_k, "d_v": d_v}


def generate(rng: np.random.Generator, level: int) -> Draft:
    sizes = _sizes(rng, level)
    right = shapes_of(**sizes)
    parts = [Part(name=name, shape=(1, 2), reference=np.array([right[name]]), decimals=0,
                  prompt=f"shapes.ask.{name}", params=dict(sizes))
             for name in PARTS_BY_LEVEL[level]]
    return Draft(given=dict(sizes), parts=parts, params=dict(sizes))


def _wrong_shapes(ex: Exercise, name: str) -> dict[str, tuple[int, int]]:
    """{misconception id: the shape that mistake gives} for part `name`."""
    s = ex.params
    n, h, d_k, d_v, d_model = s["n"], s["h"], s["d_k"], s["d_v"], s["d_model"]
    right = shapes_of(n, d_model, h, d_k, d_v)[name]
    wrong = {"shape_transposed": (right[1], right[0])}
    if name in ("scores", "A"):
        wrong["shape_scores_inner"] = (d_k, d_k)  # Qᵀ K instead of Q Kᵀ
    if name == "concat":
        wrong["shape_concat_stacked"] = (h * n, d_v)  # heads stacked as rows
        wrong["shape_concat_one_head"] = (n, d_v)  # one head's width
    if name == "W_O":
        wrong["shape_concat_one_head"] = (d_v, d_model)
    if name == "O":
        wrong["shape_output_dk"] = (n, d_k)  # the value width confused with the key width
    if name in ("Q", "K_T"):  # every head's queries side by side (X W_Q before the split); X's own width
        for mid, width in (("shape_q_all_heads", h * d_k), ("shape_q_d_model", d_model)):
            if mid == "shape_q_all_heads" or d_model != h * d_k:  # d_model = h·d_k: the heads side by side
                wrong[mid] = (n, width) if name == "Q" else (width, n)
    return {mid: shape for mid, shape in wrong.items() if shape != right}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """The named wrong order that gives `value`, or None."""
    if not np.isfinite(value).all():
        return None  # −∞ typed as a size: no order gives that
    got = tuple(int(round(x)) for x in np.ravel(value)[:2])
    for mid, shape in _wrong_shapes(ex, part.name).items():
        if got == shape:
            return mid
    return None


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The sizes, the heads (one head / h heads), then how to answer."""
    return ("kind.shapes.prompt", plural("kind.shapes.heads", int(ex.params["h"])).key, "kind.shapes.answer")


# ---------------------------------------------------------------- worked solution

SIZE_SYMBOLS = {"n": "n", "d_k": "d_k", "d_v": "d_v", "h": "h", "d_model": r"d_{\mathrm{model}}"}
# part: (its symbol, the sizes whose product gives its rows, … its columns)
RULES = {"Q": ("Q", ("n",), ("d_k",)), "K_T": (r"K^{\top}", ("d_k",), ("n",)), "scores": ("S", ("n",), ("n",)),
         "A": ("A", ("n",), ("n",)), "O": ("O", ("n",), ("d_v",)), "concat": (r"\mathrm{concat}", ("n",), ("h", "d_v")),
         "W_O": ("W_O", ("h", "d_v"), ("d_model",))}


def _size(factors: tuple[str, ...], sizes: dict[str, int] | None = None) -> str:
    """h \\cdot d_v, or with the numbers put in, 4 \\cdot 16; in parentheses beside a \\times."""
    text = r" \cdot ".join(SIZE_SYMBOLS[f] if sizes is None else str(sizes[f]) for f in factors)
    return f"({text})" if len(factors) > 1 else text


def solve(ex: Exercise) -> list[solutions.Step]:
    """One step per matrix: rows × columns by the rule, then with the numbers."""
    steps = []
    for part in ex.parts:
        symbol, rows, cols = RULES[part.name]
        shape = tuple(int(x) for x in part.reference[0])
        numbers = rf"{_size(rows, ex.params)} \times {_size(cols, ex.params)}"
        result = rf"{shape[0]} \times {shape[1]}"
        work = [("", "=", numbers)] + ([("", "=", result)] if numbers != result else [])

        def derive(i: int, j: int, rule=(rows, cols), value=shape) -> solutions.CellDerivation:
            sides = [SIZE_SYMBOLS[rule[j][0]] if len(rule[j]) == 1 else _size(rule[j])[1:-1]]
            lines = ()
            if len(rule[j]) > 1:
                sides.append(_size(rule[j], ex.params)[1:-1])
                factors = tuple(solutions.number(str(ex.params[f])) for f in rule[j])
                lines = (solutions.Substitution("sum", (factors,), str(value[j]), None),)
            latex = L.chain(r"\text{rows}" if j == 0 else r"\text{columns}", *sides, str(value[j]))
            return solutions.CellDerivation(latex, None, lines)

        steps.append(solutions.make_step(
            part.name, msg("solution.step.generic", part=msg(f"part.{part.name}")), part.reference, 0,
            symbol=r"(\text{rows}, \text{columns})", lhs=rf"\operatorname{{shape}}({symbol})",
            formula=rf"{_size(rows)} \times {_size(cols)}", work=work, exact_cells=[[str(x) for x in shape]],
            note=msg(f"solution.shapes.{part.name}"), derive=derive))
    return steps


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"(n \times d_k)(d_k \times n)")
