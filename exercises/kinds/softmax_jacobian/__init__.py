"""The softmax Jacobian of one row, unscaled and scaled: the second half of the √d_k argument.

    a = softmax(z)          J = ∂a/∂z = diag(a) − aᵀ a,   J_jk = a_j (δ_jk − a_k)
    â = softmax(z / √d_k)   Ĵ = diag(â) − âᵀ â

Every J_jk is at most a_j (1 − a_j) ≤ 1/4 in size, and it shrinks as the row sharpens: the unscaled
row (more peaked, `variance`) passes back less gradient than the scaled one. The row is
z = √d_k · ln c for small whole counts c, so e^{z_j} = c_j^{√d_k} and e^{z_j / √d_k} = c_j: both
softmaxes are simple fractions and no eˣ table is needed.

The mistakes are this kind's own (no pipeline step computes a Jacobian): diag(a) only, the sign of the
off-diagonal, −aᵀa without diag(a), Ĵ from the unscaled weights; for the weights the catalogued
no_scaling, scaled_by_dk and no_exp, and the two rows swapped.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy

from attention_core import softmax

from ... import solutions
from ...core import budget
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, decimals_for, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from .._shared import backward as B
from .._shared.hand import all_apart, own_diagnosis

ID = "softmax_jacobian"
ORDER = 105  # right after variance, whose argument it completes
VERSION = 2
LEVELS = (1, 2, 3)
GUARDS = ()  # no pipeline step makes these parts: the kind keeps its own mistakes apart (generate)
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("jacobian_diagonal_only", "jacobian_off_diagonal_sign", "jacobian_no_diagonal",
            "jacobian_unscaled_weights", "jacobian_rows_swapped")

# level: (row length n, d_k choices, counts c to draw from)
SIZES = {1: (2, (4, 9), (1, 2, 3)), 2: (3, (4,), (1, 2, 3)), 3: (4, (4, 9), (1, 2, 3))}
PARTS = ("a", "J", "a_scaled", "J_scaled")
SYMBOLS = {"a": "a", "J": "J", "a_scaled": r"\hat{a}", "J_scaled": r"\hat{J}"}


def _ln_text(root: int, c: int) -> str:
    """√d_k · ln c as written: 0, ln 2, 2 ln 3."""
    if c == 1:
        return "0"
    return f"ln {c}" if root == 1 else f"{root} ln {c}"


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The row in logarithms and, as the given grid shows it, in decimals (an exercise stored before: without)."""
    return ("kind.softmax_jacobian.prompt_decimals" if "z_decimals" in ex.params else "kind.softmax_jacobian.prompt",)


def row_text(root: int, counts) -> str:
    return "[" + ", ".join(_ln_text(root, int(c)) for c in counts) + "]"


def jacobian_of(a: np.ndarray) -> np.ndarray:
    """diag(a) − aᵀ a of a row (1, n) or (n,) of weights; (n, n)."""
    a = np.asarray(a, dtype=float).ravel()
    return np.diag(a) - np.outer(a, a)


def _draft(rng: np.random.Generator, level: int) -> Draft:
    return _built(level, *_drawn(rng, level))


def _drawn(rng: np.random.Generator, level: int) -> tuple[int, np.ndarray]:
    """d_k and the counts c of a row, every draw a variant takes from the generator, in order."""
    n, widths, values = SIZES[level]
    d_k = int(choice(rng, widths))
    while True:
        counts = np.array([choice(rng, values) for _ in range(n)], dtype=int)
        if np.ptp(counts) > 0:
            return d_k, counts


def _built(level: int, d_k: int, counts: np.ndarray) -> Draft:
    """The variant of the row z = √d_k ln c."""
    n = SIZES[level][0]
    root = math.isqrt(d_k)
    z = (root * np.log(counts.astype(float)))[None, :]  # (1, n)
    # the references from the exact fractions c^√d_k / Σ and c / Σ (attention_core agrees: tests)
    a, a_s = (exact_weights(counts, power) for power in (root, 1))
    references = {"a": _floats([a]), "J": _floats(exact_jacobian(a)), "a_scaled": _floats([a_s]),
                  "J_scaled": _floats(exact_jacobian(a_s))}
    decimals = spec(level).decimals
    parts = [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals))
             for name, ref in references.items()]
    params = {"n": n, "d_k": d_k, "root": root, "z_text": row_text(root, counts), "scaled_text": row_text(1, counts),
              "z_decimals": "[" + ", ".join(L.number(float(x)) for x in z[0]) + "]",  # as the given grid shows z
              "counts": [int(c) for c in counts]}
    return Draft(given={"z": z, "d_k": d_k}, parts=parts, params=params)


def exact_weights(counts, power: int) -> list[Fraction]:
    """softmax(power · ln c) = c^power / Σ c^power, exactly."""
    exps = [int(c) ** power for c in counts]
    return [Fraction(e, sum(exps)) for e in exps]


def exact_jacobian(a: list[Fraction]) -> list[list[Fraction]]:
    """J_jk = a_j (δ_jk − a_k), exactly."""
    return [[a[j] * ((1 if j == k else 0) - a[k]) for k in range(len(a))] for j in range(len(a))]


def _floats(rows) -> np.ndarray:
    return np.array([[float(x) for x in row] for row in rows])


def largest_entry(a: list[Fraction]) -> Fraction:
    """max |J_jk| = max_j a_j (1 − a_j) (an off-diagonal a_j a_k is never larger)."""
    return max(x * (1 - x) for x in a)


SHRINK = 0.02  # the unscaled row's largest |J| is visibly (to 2 decimals) below the scaled row's


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A row whose sharper unscaled row has the visibly smaller largest Jacobian entry, and whose mistakes
    all differ from the answers and from each other (to 2 decimals too)."""
    while True:
        draft = _draft(rng, level)
        if _takes(draft):
            return draft


def _shrinks(counts, root: int) -> bool:
    """The sharper unscaled row's largest |J| is visibly below the scaled row's."""
    return largest_entry(exact_weights(counts, 1)) - largest_entry(exact_weights(counts, root)) >= SHRINK


def _takes(draft: Draft) -> bool:
    """The rule a row is taken by: it shrinks and its mistakes are all apart."""
    z, d_k = draft.given["z"], draft.given["d_k"]
    counts, root = draft.params["counts"], draft.params["root"]
    return _shrinks(counts, root) and all_apart(draft.parts, lambda p, z=z, d_k=d_k: mistakes_of(z, d_k, p.name))


def counts_of(ex: Exercise) -> np.ndarray:
    """The whole counts c of the row z = √d_k ln c."""
    root = math.isqrt(int(ex.given["d_k"]))
    return np.rint(np.exp(np.asarray(ex.given["z"], dtype=float).ravel() / root)).astype(int)


# ---------------------------------------------------------------- mistakes, diagnosis, carrying forward


def _jacobian_mistakes(a: np.ndarray) -> dict[str, np.ndarray]:
    a = np.asarray(a, dtype=float).ravel()
    outer = np.outer(a, a)
    return {"jacobian_diagonal_only": np.diag(a),
            "jacobian_off_diagonal_sign": np.diag(a) - np.diag(a * a) + (outer - np.diag(a * a)),
            "jacobian_no_diagonal": -outer}


def _no_exp(z: np.ndarray) -> np.ndarray | None:
    return z / z.sum() if np.all(z >= 0) and z.sum() > 0 else None


def mistakes_of(z: np.ndarray, d_k: int, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} for the row z (1, n)."""
    z = np.asarray(z, dtype=float)
    root = math.sqrt(d_k)
    a, a_s = softmax(z), softmax(z / root)
    found: dict[str, np.ndarray | None] = {}
    if name == "a":
        found = {"jacobian_rows_swapped": a_s, "no_exp": _no_exp(z)}
    elif name == "a_scaled":
        found = {"no_scaling": a, "scaled_by_dk": softmax(z / d_k), "no_exp": _no_exp(z / root)}
    elif name == "J":
        found = dict(_jacobian_mistakes(a))
    elif name == "J_scaled":
        found = {**_jacobian_mistakes(a_s), "jacobian_unscaled_weights": jacobian_of(a)}
    return {mid: alt for mid, alt in found.items() if alt is not None}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    found = mistakes_of(ex.given["z"], int(ex.given["d_k"]), part.name)
    # a Jacobian built the wrong way from the learner's own weights is named too
    return own_diagnosis(part, value, found)


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """a and â from z unless the learner gave them; J and Ĵ from those weights (each rounded half-up to
    `rounding` places when it is computed, None: exact)."""
    env = dict(values)
    z = np.asarray(ex.given["z"], dtype=float)
    root = math.sqrt(int(ex.given["d_k"]))
    for weights, jac, row in (("a", "J", z), ("a_scaled", "J_scaled", z / root)):
        if weights not in env:
            env[weights] = round_half_up(softmax(row), rounding)
        if jac not in env:
            with np.errstate(invalid="ignore", over="ignore"):
                env[jac] = round_half_up(jacobian_of(env[weights]), rounding)
    return env


def operations(ex: Exercise):
    """Two softmaxes of a row with whole exponentials (no table), two Jacobians, every cell written: the
    powers e^{z_j} = c_j^{√d_k} worked out and written (e^{z_j / √d_k} = c_j is read off), each row's sum."""
    n = int(ex.given["z"].shape[1])
    root = math.isqrt(int(ex.given["d_k"]))
    counts = np.rint(np.exp(np.asarray(ex.given["z"], dtype=float) / root))  # (1, n): the c_j
    powers = budget.Operations(multiply_adds=(root - 1) * int((counts > 1).sum()), cells=n)
    row = budget.Operations(additions=n - 1, divisions=n, cells=1)  # Σ written, then one division per weight
    jac = budget.Operations(multiply_adds=n * n, additions=n)  # a_j a_k, and a_j − a_j² on the diagonal
    cells = budget.parts_written(ex)
    return powers + row + row + jac + jac + cells


# ---------------------------------------------------------------- worked solution


def _weights_step(ex: Exercise, name: str, counts: list[int], power: int) -> object:
    """a_j = e^{z_j} / Σ_k e^{z_k} with e^{z_j} = c_j^power: the exponentials are whole numbers."""
    part = ex.part(name)
    s = SYMBOLS[name]
    zs = "z" if name == "a" else r"\hat{z}"
    exps = [c ** power for c in counts]
    total = sum(exps)
    exact = [sympy.Rational(e, total) for e in exps]
    exps_latex = ", ".join(f"e^{{{_ln_latex(power, c)}}}" for c in counts)
    work = [(rf"e^{{{zs}}}", "=", rf"\left[{exps_latex}\right] = \left[{', '.join(map(str, exps))}\right]"),
            (s, "=", L.bmatrix([[L.rational(x) for x in exact]]))]
    cells = [L.rational(x) for x in exact]

    def derive(_: int, j: int) -> solutions.CellDerivation:
        numbers = L.frac(str(exps[j]), " + ".join(map(str, exps)))
        terms = [[solutions.number(str(exps[j]))], [solutions.number(str(e)) for e in exps]]
        latex, sub = solutions.worked_chain(
            f"{s}_{{{j + 1}}}", cells[j], float(part.reference[0, j]), part.decimals, numbers, "quotient", terms,
            L.frac(f"e^{{{zs}_{{{j + 1}}}}}", rf"\sum_{{k}} e^{{{zs}_{{k}}}}"))
        return solutions.CellDerivation(latex, None, (sub,))

    return solutions.make_step(name, msg(f"solution.softmax_jacobian.{name}"), part.reference, part.decimals,
                               symbol=s, lhs=f"{s}_{{j}}",
                               formula=L.frac(f"e^{{{zs}_{{j}}}}", rf"\sum_{{k}} e^{{{zs}_{{k}}}}"),
                               work=work, exact_cells=[cells], note=msg(f"solution.softmax_jacobian.{name}.note"),
                               derive=derive)


def _ln_latex(power: int, c: int) -> str:
    if c == 1:
        return "0"
    return rf"\ln {c}" if power == 1 else rf"{power} \ln {c}"


def _jacobian_step(ex: Exercise, name: str, weights: str, exact_a: list) -> object:
    """J_jk = a_j (δ_jk − a_k), from the weights as the step before shows them (exact fractions)."""
    part = ex.part(name)
    s, a_sym = SYMBOLS[name], SYMBOLS[weights]
    n = len(exact_a)
    E = sympy.Matrix(n, n, lambda j, k: exact_a[j] * ((1 if j == k else 0) - exact_a[k]))
    cells = [[L.rational(E[j, k]) for k in range(n)] for j in range(n)]
    shown = [L.rational(x) for x in exact_a]
    work = [(s, "=", rf"\operatorname{{diag}}({a_sym}) - {a_sym}^{{\top}} {a_sym}"),
            ("", "=", rf"\operatorname{{diag}}\left({L.bmatrix([shown])}\right) - "
                      rf"{L.bmatrix([[x] for x in shown])} {L.bmatrix([shown])}")]

    def derive(j: int, k: int) -> solutions.CellDerivation:
        delta = "1" if j == k else "0"
        numbers = f"{shown[j]} \\cdot \\left({delta} - {shown[k]}\\right)"
        terms = [[solutions.number(shown[j], exact_a[j])],
                 [solutions.number(delta), solutions.number(shown[k], exact_a[k])]]
        symbolic = rf"{a_sym}_{{{j + 1}}} \left(\delta_{{{j + 1}{k + 1}}} - {a_sym}_{{{k + 1}}}\right)"
        latex, sub = solutions.worked_chain(L.cell(s, j, k), cells[j][k], float(E[j, k]), part.decimals,
                                            numbers, "times_difference", terms, symbolic)
        note = msg("solution.softmax_jacobian.cell_diagonal" if j == k else "solution.softmax_jacobian.cell_off")
        return solutions.CellDerivation(latex, note, (sub,))

    return solutions.make_step(name, msg(f"solution.softmax_jacobian.{name}"), part.reference, part.decimals,
                               symbol=s, lhs=rf"{s}_{{jk}}",
                               formula=rf"{a_sym}_{{j}} \left(\delta_{{jk}} - {a_sym}_{{k}}\right)",
                               work=work, exact_cells=cells, note=msg("solution.softmax_jacobian.J.note"),
                               derive=derive)


def _compare_step(ex: Exercise, exact_a: list, exact_as: list) -> object:
    """The largest |J| entry of each row: the sharper row passes back less."""
    peak = [max(x * (1 - x) for x in w) for w in (exact_a, exact_as)]
    value = np.array([[float(p) for p in peak]])
    cells = [L.rational(p) for p in peak]
    names = (r"\max_{j,k} |J_{jk}|", r"\max_{j,k} |\hat{J}_{jk}|")

    weights = ("a", r"\hat{a}")

    def derive(_: int, j: int) -> solutions.CellDerivation:
        w = weights[j]
        return solutions.CellDerivation(
            solutions.result_chain(names[j], cells[j], L.decimal(value[0, j], 2), value[0, j], False,
                                   rf"\max_{{j}} {w}_{{j}} (1 - {w}_{{j}})"))

    return solutions.make_step("largest", msg("solution.softmax_jacobian.largest"), value, 2,
                               symbol=r"\left[\max |J|,\ \max |\hat{J}|\right]", exact_cells=[cells],
                               note=msg("solution.softmax_jacobian.largest.note"), derive=derive)


def solve(ex: Exercise) -> list:
    """The two softmaxes and their Jacobians (exact fractions), the largest entries side by side, and a
    finite-difference check of one entry of J."""
    root = math.isqrt(int(ex.given["d_k"]))
    counts = [int(c) for c in counts_of(ex)]
    exact_a = [sympy.Rational(x.numerator, x.denominator) for x in exact_weights(counts, root)]
    exact_as = [sympy.Rational(x.numerator, x.denominator) for x in exact_weights(counts, 1)]
    steps = [_weights_step(ex, "a", counts, root), _jacobian_step(ex, "J", "a", exact_a),
             _weights_step(ex, "a_scaled", counts, 1), _jacobian_step(ex, "J_scaled", "a_scaled", exact_as),
             _compare_step(ex, exact_a, exact_as)]
    J = ex.part("J").reference
    j, k = B.largest(J - np.diag(np.diag(J)))  # an off-diagonal entry: the one with the minus sign
    z = np.asarray(ex.given["z"], dtype=float)
    steps.append(B.check_step(msg("solution.softmax_jacobian.check"),
                              msg("solution.softmax_jacobian.check.note", row=j + 1, col=k + 1),
                              lambda p: float(softmax(p["z"])[0, j]), rf"a_{{{j + 1}}}(z)", {"z": z}, "z", (0, k),
                              f"z_{{{k + 1}}}", L.cell("J", j, k), float(J[j, k]), ex.part("J").decimals))
    return steps


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("backward", r"J = \operatorname{diag}(a) - a^{\top} a")
SHEET = SheetSection("backward", (
    Formula(r"[[J | n | n]] = \frac{\partial a}{\partial z} = \operatorname{diag}(a) - a^{\top} a, \qquad "
            r"J_{jk} = a_{j} \left(\delta_{jk} - a_{k}\right)", "formulas.softmax_jacobian.cells"),
    Formula(r"|J_{jk}| \le a_{j} (1 - a_{j}) \le \tfrac{1}{4}, \qquad a_{j} \to 1 \ \Rightarrow\ J \to 0",
            "formulas.softmax_jacobian.sharp"),
    Formula(r"\hat{a} = \operatorname{softmax}\!\left(\frac{z}{\sqrt{d_k}}\right), \qquad "
            r"\hat{J} = \operatorname{diag}(\hat{a}) - \hat{a}^{\top} \hat{a}", "formulas.softmax_jacobian.scaled"),
), position=219)  # in the backward tab, just before the softmax backward it underlies
