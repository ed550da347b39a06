"""Sinusoidal position encodings, X + P, and why attention needs them: without positions, permuting
the tokens only permutes the output.

    P[p, 2i−1] = sin(p ω_i),  P[p, 2i] = cos(p ω_i),  ω_i = 10000^(−2(i−1)/d)  (radians; columns 1-based)
    X_P = X + P
    O = softmax(X Xᵀ / √d) X  (attention with Q = K = V = X, no positions)
    O_perm = the same for the rows of X in the order perm  =  the rows of O in that order

The sin/cos table of every angle that appears is in the prompt (3 decimals). Level 1 asks for P and X_P
(d = 2); levels 2 and 3 add the permutation (d = 4, so √d = 2), with the eˣ table of the softmax.
The mistakes are this kind's own (positional_* in its locales) and, for O, the catalogued no_scaling
and softmax_columns; no pipeline step makes P, X_P or O_perm, and O is computed from the given X
alone, so the kind keeps them apart itself (generate).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from attention_core import softmax
from attention_core.positions import frequencies, sinusoidal

from ... import solutions
from ...core import budget, misconceptions, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, decimals_for, nonzero_matrix, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids
from .._shared.hand import carried, own_diagnosis

ID = "positional"
ORDER = 86  # after rope
VERSION = 1
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {2: (ExpSeries(1, 2, 0, 4),), 3: (ExpSeries(1, 2, 0, 4),)}
GUARDS = ()  # no pipeline step makes these parts: the kind keeps its own mistakes apart (generate)
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("positional_sin_cos_swapped", "positional_from_one", "positional_one_frequency", "positional_multiplied",
            "positional_not_permuted", "positional_inverse_permutation", "positional_with_positions")

GIVEN_SHOWN = {"perm": "from_one"}  # stored 0-based, shown from 1 like the prompt's order and the solution
# level: (n tokens, d, values of X, first positions to draw from, permutations to draw from (0-based), or ())
SIZES = {1: ((2, 3), 2, (0, 1, 2), (0, 1, 2), ()),
         2: ((2,), 4, (0, 1), (0,), ((1, 0),)),
         3: ((3,), 4, (0, 1), (0,), ((1, 2, 0), (2, 0, 1), (1, 0, 2), (0, 2, 1), (2, 1, 0)))}
TABLE_PLACES = 3


def attention_given(X: np.ndarray) -> dict:
    """Attention without positions as a pipeline input: Q = K = V = X, d_k = d, no mask."""
    return {"Q": X, "K": X, "V": X, "d_k": int(X.shape[1]), "causal": False}


def attend(X: np.ndarray) -> np.ndarray:
    """O = softmax(X Xᵀ / √d) X; (n, d)."""
    return softmax(X @ X.T / math.sqrt(X.shape[1])) @ X


def _draft(rng: np.random.Generator, level: int) -> Draft:
    ns, d, values, starts, perms = SIZES[level]
    n = int(choice(rng, ns))
    start = int(choice(rng, starts))
    pos = np.arange(start, start + n, dtype=float)  # (n,)
    while True:
        X = nonzero_matrix(rng, (n, d), values)  # (n, d)
        if len({tuple(r) for r in X}) == n:  # distinct tokens: permuting them changes something
            break
    P = sinusoidal(pos, d)  # (n, d)
    references = {"P": P, "X_P": X + P}
    given: dict = {"X": X, "pos": pos}
    if perms:
        perm = np.array(choice(rng, perms), dtype=float)  # (n,) the new order of the tokens, 0-based
        given["perm"] = perm
        O = attend(X)
        references.update(O=O, O_perm=attend(X[perm.astype(int)]))
    decimals = spec(level).decimals
    parts = [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals))
             for name, ref in references.items()]
    return Draft(given=given, parts=parts, params={})


def _params(given: dict) -> dict:
    """The prompt's placeholders (made once a draft is kept)."""
    X, pos = given["X"], given["pos"]
    n, d = X.shape
    params = {"n": n, "d": d, "pos_text": ", ".join(str(int(p)) for p in pos),
              "freq_text": ", ".join(_freq_text(w) for w in frequencies(d)), "table": trig_table(pos, d)}
    if "perm" in given:
        params["perm_text"] = ", ".join(str(int(k) + 1) for k in given["perm"])
    return params


def generate(rng: np.random.Generator, level: int) -> Draft:
    """Variants whose mistakes all differ from the answers and from each other (to 2 decimals too)."""
    while True:
        draft = _draft(rng, level)
        if not misconceptions.clash_by_part({p.name: p for p in draft.parts}, _mistakes(draft.given)):
            return replace(draft, params=_params(draft.given))


def _freq_text(w: float) -> str:
    return str(int(w)) if float(w).is_integer() else f"{w:g}"


def angles_of(pos: np.ndarray, d: int) -> np.ndarray:
    """p ω_i in radians; (n, d/2)."""
    return np.outer(np.asarray(pos, dtype=float), frequencies(d))


def trig_table(pos: np.ndarray, d: int) -> str:
    """sin and cos (3 decimals) of every angle p ω_i, in the prompt's words."""
    rows = []
    for a in sorted({round(float(x), 9) for x in angles_of(pos, d).ravel()}):
        shown = _freq_text(a)
        if a == 0:
            rows.append("sin 0 = 0, cos 0 = 1")
            continue
        rows.append(f"sin {shown} ≈ {_three(math.sin(a))}, cos {shown} ≈ {_three(math.cos(a))}")
    return "; ".join(rows)


def _three(x: float) -> str:
    return L.decimal(x, TABLE_PLACES).replace("-", "−")


# ---------------------------------------------------------------- mistakes, diagnosis, carrying forward


def _swapped(P: np.ndarray) -> np.ndarray:
    out = P.copy()
    out[:, 0::2], out[:, 1::2] = P[:, 1::2], P[:, 0::2]
    return out


def mistakes_of(given: dict, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`}."""
    return _mistakes(given).get(name, {})


def _mistakes(given: dict) -> dict[str, dict[str, np.ndarray]]:
    """{part name: {mistake id: what it gives for that part}}, every part of the variant at once."""
    X, pos = np.asarray(given["X"], dtype=float), np.asarray(given["pos"], dtype=float)
    d = X.shape[1]
    P = sinusoidal(pos, d)
    swapped = _swapped(P)
    found = {"P": {"positional_sin_cos_swapped": swapped, "positional_from_one": sinusoidal(pos + 1, d)},
             "X_P": {"positional_sin_cos_swapped": X + swapped, "positional_multiplied": X * P}}
    if d > 2:
        one_frequency = np.empty_like(P)
        one_frequency[:, 0::2], one_frequency[:, 1::2] = np.sin(pos)[:, None], np.cos(pos)[:, None]
        found["P"]["positional_one_frequency"] = one_frequency
    if "perm" in given:
        found["O"] = {"no_scaling": softmax(X @ X.T) @ X,
                      "softmax_columns": softmax(X @ X.T / math.sqrt(d), axis=0) @ X}
        perm = np.asarray(given["perm"], dtype=int)
        O = attend(X)
        inverse = np.argsort(perm)
        O_perm = {"positional_not_permuted": O}
        if not np.array_equal(inverse, perm):
            O_perm["positional_inverse_permutation"] = O[inverse]
        O_perm["positional_with_positions"] = attend(X[perm] + P)  # positions added: no longer a permutation
        found["O_perm"] = O_perm
    return found


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex.given, part.name))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """P from the positions, X_P = X + P from the learner's P, O through the pipeline (Q = K = V = X) and
    O_perm from the learner's O, each computed value rounded half-up to `rounding` places."""
    env = dict(values)
    g = ex.given
    X = np.asarray(g["X"], dtype=float)
    env.setdefault("P", round_half_up(sinusoidal(g["pos"], X.shape[1]), rounding))
    with np.errstate(invalid="ignore", over="ignore"):
        env.setdefault("X_P", round_half_up(X + np.asarray(env["P"]), rounding))
        if "perm" in g:
            if "O" not in env:
                env["O"] = pipeline.run(attention_given(X), until={"O"}, rounding=rounding)["O"]
            env.setdefault("O_perm", np.asarray(env["O"])[np.asarray(g["perm"], dtype=int)])
    return env


def operations(ex: Exercise):
    """P read off the table (one lookup a cell), X + P, attention without positions by hand (every value on
    the way written), O_perm read off O."""
    X = np.asarray(ex.given["X"], dtype=float)
    total = budget.Operations(additions=int(np.size(X)), lookups=int(np.size(X)))
    if "perm" in ex.given:
        total = total + budget.count(attention_given(X), ["O"], written=())
    return total + budget.parts_written(ex)


def aids(ex: Exercise):
    """The eˣ table of the softmax of attention without positions, and √d (the sin/cos table is in the prompt)."""
    if "perm" not in ex.given:
        return solutions.Aids(shapes=solutions.shapes_of(ex))
    X = np.asarray(ex.given["X"], dtype=float)
    return softmax_aids(ex, [attention_given(X)], L.sqrt_dk(int(X.shape[1])))


# ---------------------------------------------------------------- worked solution


def _p_step(ex: Exercise):
    part = ex.part("P")
    pos = ex.given["pos"]
    d = part.shape[1]
    w = frequencies(d)

    def derive(p: int, c: int):
        i = c // 2
        fn = r"\sin" if c % 2 == 0 else r"\cos"
        arg = f"{int(pos[p])} \\cdot {_freq_text(w[i])}"
        angle = _freq_text(pos[p] * w[i])
        exact = "0" if (fn == r"\sin" and pos[p] == 0) else ("1" if pos[p] == 0 else None)
        latex = solutions.result_chain(L.cell("P", p, c), exact, L.decimal(part.reference[p, c], part.decimals),
                                       float(part.reference[p, c]), False, rf"{fn}\left({arg}\right)",
                                       rf"{fn} {angle}")
        return solutions.CellDerivation(latex, msg("solution.positional.P.cell_sin" if c % 2 == 0
                                                   else "solution.positional.P.cell_cos", pair=i + 1))

    exact = [["0" if (c % 2 == 0 and pos[p] == 0) else ("1" if pos[p] == 0 else None) for c in range(d)]
             for p in range(part.shape[0])]
    formula = (r"\begin{cases} \sin(p\,\omega_{i}) & c = 2i-1 \\ \cos(p\,\omega_{i}) & "
               r"c = 2i \end{cases}, \quad \omega_{i} = 10000^{-2(i-1)/d}")
    return solutions.make_step("P", msg("solution.positional.P"), part.reference, part.decimals, symbol="P",
                               lhs=r"P_{p,c}", formula=formula, exact_cells=exact,
                               work=[(r"\omega", "=", L.bmatrix([[_freq_text(x) for x in w]]))],
                               note=msg("solution.positional.P.note"), derive=derive)


def _sum_step(ex: Exercise):
    part, P = ex.part("X_P"), ex.part("P")
    X = ex.given["X"]

    def derive(i: int, j: int):
        terms = [(solutions.number(str(int(X[i, j]))),), (carried(P.reference[i, j], P.decimals),)]
        latex, sub = solutions.worked_chain(L.cell("X_P", i, j), None, float(part.reference[i, j]), part.decimals,
                                            " + ".join(t[0].text if not t[0].text.startswith("-")
                                                       else L.paren(t[0].text) for t in terms), "sum", terms,
                                            f"{L.cell('X', i, j)} + {L.cell('P', i, j)}")
        return solutions.CellDerivation(latex, None, (sub,))

    return solutions.make_step("X_P", msg("solution.positional.X_P"), part.reference, part.decimals,
                               symbol="X_P", formula="X + P", note=msg("solution.positional.X_P.note"),
                               derive=derive)


def _perm_step(ex: Exercise):
    part = ex.part("O_perm")
    perm = np.asarray(ex.given["perm"], dtype=int)
    symbol = r"O_{\mathrm{perm}}"

    def derive(i: int, j: int):
        latex = L.chain(L.cell(symbol, i, j), L.cell("O", int(perm[i]), j), L.decimal(part.reference[i, j],
                                                                                        part.decimals))
        return solutions.CellDerivation(latex, msg("solution.positional.O_perm.cell", row=i + 1, token=perm[i] + 1))

    rows = L.bmatrix([[f"o_{{{int(k) + 1}}}"] for k in perm])
    return solutions.make_step("O_perm", msg("solution.positional.O_perm"), part.reference, part.decimals,
                               symbol=symbol, formula=rows,
                               note=msg("solution.positional.O_perm.note"), derive=derive)


def solve(ex: Exercise) -> list:
    """P from the sin/cos table, X + P; then attention without positions (Q = K = V = X) through the
    pipeline's own steps, and O_perm as O's rows in the new order."""
    from dataclasses import replace


    steps = [_p_step(ex), _sum_step(ex)]
    if "perm" in ex.given:
        O = ex.part("O")
        for step in solutions.pipeline_steps(attention_given(np.asarray(ex.given["X"], dtype=float)), ["O"],
                                             places={"O": O.decimals}, values={"O": O.reference}):
            if step.name == "scores":
                step = replace(step, note=msg("solution.positional.no_positions"))
            steps.append(step)
        steps.append(_perm_step(ex))
    return steps


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    return ("kind.positional.prompt", *(("kind.positional.prompt_perm",) if "perm" in ex.given else ()))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"X + P,\ \ P_{p,2i-1} = \sin(p\,\omega_i)")
SHEET = SheetSection("forward", (
    Formula(r"[[P | n | d]], \qquad P_{p,2i-1} = \sin(p\,\omega_{i}), \quad P_{p,2i} = \cos(p\,\omega_{i}), \quad "
            r"\omega_{i} = 10000^{-2(i-1)/d}", "formulas.positional.sinusoid"),
    Formula(r"[[X_P | n | d]] = X + P", "formulas.positional.sum"),
    Formula(r"\operatorname{Attention}(\Pi X) = \Pi \operatorname{Attention}(X)", "formulas.positional.permutation"),
))
