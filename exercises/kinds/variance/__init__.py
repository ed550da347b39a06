"""Why divide by √d_k: Var(q·k) = d_k for independent unit-variance components, so its standard
deviation is √d_k (d_k = 64 → 8); after the division both are 1. Then one row of scores through the
softmax at both scales, to see how the unscaled row is much more peaked.

A row with a score above 4 or beyond ±10 (level 3: S up to 40) goes through the softmax minus its maximum,
which changes no weight: the eˣ aid and the worked solution list e^(S_j − max S), never e⁸ = 2980.958 or
e⁴⁰, so every eˣ a learner adds is at most e⁴ ≈ 54.6. Each part's
catalogued mistakes (no e^x, the wrong scale) are kept apart from the answer and from each other.

    Var(q·k) = Σ_i Var(q_i k_i) = d_k        Var(q·k / √d_k) = d_k / d_k = 1
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from attention_core import softmax

from ... import solutions
from ...core import budget, misconceptions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, decimals_for
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids

ID = "variance"
ORDER = 100
VERSION = 3
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {1: (ExpSeries(1, 1, -8, 8), ExpSeries(8, 1, -2, -2)),
            2: (ExpSeries(1, 1, -10, 10), ExpSeries(10, 1, -3, -1),),
            3: (ExpSeries(1, 2, -4, 4), ExpSeries(1, 1, -10, 10), ExpSeries(10, 1, -6, -1),)}
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ()
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("variance_std_confused", "variance_divide_squared", "softmax_scales_swapped")

KEY_WIDTHS = {1: (4, 16, 64), 2: (16, 36, 64, 100), 3: (64, 144, 256, 400)}  # squares: √d_k is whole
ROW_LENGTH = {1: 2, 2: 3, 3: 4}
SCALED_VALUES = {1: (0, 1, 2), 2: (-1, 0, 1, 2), 3: (-1, -0.5, 0, 0.5, 1, 1.5, 2)}  # z / √d_k
LARGEST_PLAIN_EXPONENT = 4  # a row with a score above it goes through the softmax minus its maximum (e⁴ ≈ 54.6)
LARGEST_TABLE_EXPONENT = 10  # and a row with a score beyond ±10 (the table's range)


def _row(rng: np.random.Generator, level: int) -> np.ndarray:
    """Scaled scores from a small set (not all equal), so that z = √d_k × them."""
    while True:
        row = np.array([[choice(rng, SCALED_VALUES[level]) for _ in range(ROW_LENGTH[level])]], dtype=float)
        if np.ptp(row) > 0:
            return row  # (1, m)


def _draft(rng: np.random.Generator, level: int) -> Draft:
    d_k = int(choice(rng, KEY_WIDTHS[level]))
    root = math.isqrt(d_k)
    z = root * _row(rng, level)  # (1, m) unscaled scores of one query
    references = {"var_before": [[d_k]], "std_before": [[root]], "var_after": [[1]], "std_after": [[1]],
                  "A_unscaled": softmax(z), "A_scaled": softmax(z / root)}  # (1, m) each
    decimals = spec(level).decimals
    parts = [Part(name=name, shape=np.shape(ref), reference=ref,
                  decimals=decimals_for(np.asarray(ref, dtype=float), decimals))
             for name, ref in references.items()]
    return Draft(given={"d_k": d_k, "scores": z}, parts=parts, params={"d_k": d_k, "m": z.shape[1]})


def _apart(draft: Draft) -> bool:
    """Every part's mistakes differ from its answer and from each other (rounded to 2 decimals too): the
    two softmax rows first (the whole numbers' mistakes are √d_k ≥ 2 away), each part's own check a
    yes/no (misconceptions.clashes' decision)."""
    d_k, z = int(draft.given["d_k"]), np.asarray(draft.given["scores"], dtype=float)
    ordered = sorted(draft.parts, key=lambda p: not p.name.startswith("A_"))
    return all(not misconceptions.any_clash(part.reference, mistakes_of(d_k, z, part.name),
                                            misconceptions.separation(part))
               for part in ordered)


def generate(rng: np.random.Generator, level: int) -> Draft:
    while True:  # S = [0, 16]: z / Σz = [0, 1] is the unscaled softmax to 2 decimals, so no_exp would pass
        draft = _draft(rng, level)
        if _apart(draft):
            return draft


def needs_shift(z: np.ndarray) -> bool:
    """Does the row go through the softmax minus its maximum (a score above LARGEST_PLAIN_EXPONENT, or beyond
    ±LARGEST_TABLE_EXPONENT)?"""
    return bool(z.max() > LARGEST_PLAIN_EXPONENT or np.abs(z).max() > LARGEST_TABLE_EXPONENT)


def _no_exp(z: np.ndarray) -> np.ndarray | None:
    """Each score divided by the row sum, no e^x (a mistake only where that reads as weights)."""
    return z / z.sum() if np.all(z >= 0) and z.sum() > 0 else None


def mistakes_of(d_k: int, z: np.ndarray, name: str) -> dict[str, np.ndarray]:
    """{misconception id: what that mistake gives for part `name`} for the unscaled row z, (1, m)."""
    root = math.sqrt(d_k)
    if name == "var_before":
        return {"variance_std_confused": np.array([[root]])}
    if name == "std_before":
        return {"variance_std_confused": np.array([[d_k]])}
    if name == "var_after":
        return {"variance_divide_squared": np.array([[d_k / root]])}  # divided the variance by √d_k only
    found: dict[str, np.ndarray | None] = {}
    if name == "A_scaled":
        found = {"no_scaling": softmax(z), "scaled_by_dk": softmax(z / d_k), "no_exp": _no_exp(z / root)}
    if name == "A_unscaled":
        found = {"softmax_scales_swapped": softmax(z / root), "no_exp": _no_exp(z)}
    return {mid: alt for mid, alt in found.items() if alt is not None}


def _mistakes(ex: Exercise, name: str) -> dict[str, np.ndarray]:
    return mistakes_of(int(ex.given["d_k"]), np.asarray(ex.given["scores"], dtype=float), name)


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    for mid, alt in _mistakes(ex, part.name).items():
        if not misconceptions.matches(alt, part.reference, tolerance) and misconceptions.matches(value, alt, tolerance):
            return mid
    return None


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The question, and a line on the max-shifted eˣ table when the row has a large score."""
    shifted = needs_shift(np.asarray(ex.given["scores"], dtype=float))  # read from the row: stored exercises too
    return ("kind.variance.prompt", *(("kind.variance.prompt_shifted",) if shifted else ()))


def _softmax_input(z: np.ndarray) -> np.ndarray:
    """The row the softmax is worked on: minus its maximum when it has a large score (same weights)."""
    return z - z.max() if needs_shift(z) else z


def operations(ex: Exercise) -> budget.Operations:
    """The real work: √d_k read off, the unscaled row minus its maximum where it has a large score (one
    subtraction a cell), z / √d_k written, both rows through the softmax as the step records count one, every
    cell asked written."""
    d_k, z = int(ex.given["d_k"]), np.asarray(ex.given["scores"], dtype=float)  # (1, m)
    root = math.isqrt(d_k)
    total = budget.Operations(lookups=1) + budget.parts_written(ex)
    if needs_shift(z):
        total = total + budget.Operations(additions=int(np.count_nonzero(z != z.max())), cells=z.size)
    total = total + budget.Operations(divisions=int(np.count_nonzero(z)), cells=z.size)  # z / √d_k
    return total + budget.softmax_operations(_softmax_input(z)) + budget.softmax_operations(z / root)


# ---------------------------------------------------------------- worked solution

DOT = r"q \cdot k"
SCALED_DOT = r"\frac{q \cdot k}{\sqrt{d_k}}"


def _number_step(name: str, value: float, lhs: str, formula: str, numbers: str) -> solutions.Step:
    """A 1×1 step: formula, the numbers put in, a whole result."""
    result = str(int(value))
    work = [("", "=", numbers)] if numbers != result else []
    chain = L.chain(lhs, formula, *(side for _, _, side in work), result)
    return solutions.make_step(name, msg(f"solution.variance.{name}"), np.array([[value]]), 0, symbol=lhs,
                               formula=formula, work=work, exact_cells=[[result]],
                               note=msg(f"solution.variance.{name}.note"),
                               derive=lambda i, j: solutions.CellDerivation(chain))


def _softmax_of(name: str, part: Part, given: dict, targets: list[str], symbol: str | None = None,
                note: str | None = None):
    """The softmax steps for one part; `symbol` renames the softmax input (S for the unscaled row)."""
    ctx = solutions.build_context(given, targets, places={"A": part.decimals, "scaled": 0},
                                  values={"A": part.reference})
    if symbol is not None:
        ctx.symbols["scaled"] = ctx.symbols["masked"] = symbol
    for step_name in ctx.shown:
        step = solutions.BUILDERS[step_name](ctx, step_name)
        if step_name == "A":
            step = replace(step, name=name, title=msg(f"solution.variance.{name}"),
                           **({"note": msg(note)} if note else {}))
        yield step


def solve(ex: Exercise) -> list[solutions.Step]:
    """The variance argument in four lines, then the same row through the softmax at both scales."""
    d_k = int(ex.given["d_k"])
    root = math.isqrt(d_k)
    z = np.asarray(ex.given["scores"], dtype=float)  # (1, m)
    steps = [
        _number_step("var_before", d_k, rf"\operatorname{{Var}}({DOT})",
                     r"\sum_{i=1}^{d_k} \operatorname{Var}(q_i)\,\operatorname{Var}(k_i) = d_k \cdot 1 \cdot 1",
                     str(d_k)),
        _number_step("std_before", root, rf"\sigma({DOT})", rf"\sqrt{{\operatorname{{Var}}({DOT})}}",
                     rf"\sqrt{{{d_k}}}"),
        _number_step("var_after", 1, rf"\operatorname{{Var}}\left({SCALED_DOT}\right)",
                     rf"\frac{{\operatorname{{Var}}({DOT})}}{{(\sqrt{{d_k}})^2}}", rf"\frac{{{d_k}}}{{{d_k}}}"),
        _number_step("std_after", 1, rf"\sigma\left({SCALED_DOT}\right)", rf"\frac{{\sigma({DOT})}}{{\sqrt{{d_k}}}}",
                     rf"\frac{{{root}}}{{{root}}}"),
    ]
    if needs_shift(z):  # e^(S_j − max S): the same weights, and no e^40 to write
        steps += _softmax_of("A_unscaled", ex.part("A_unscaled"), {"scaled": _softmax_input(z), "causal": False},
                             ["A"], symbol=r"\hat{S}", note="solution.variance.A_unscaled.shifted")
    else:
        steps += _softmax_of("A_unscaled", ex.part("A_unscaled"), {"scaled": z, "causal": False}, ["A"], symbol="S")
    steps += _softmax_of("A_scaled", ex.part("A_scaled"), {"scores": z, "d_k": d_k, "causal": False}, ["A"])
    return steps


def aids(ex: Exercise) -> solutions.Aids:
    """e^x for both rows (as given, or minus the row's maximum when it has a large score, as the prompt
    says), and √d_k."""
    d_k, z = int(ex.given["d_k"]), np.asarray(ex.given["scores"], dtype=float)
    return softmax_aids(ex, [{"scaled": _softmax_input(z), "causal": False},
                             {"scores": z, "d_k": d_k, "causal": False}],
                        L.sqrt_dk(d_k))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"\operatorname{Var}(q \cdot k) = d_k")
# the sheet shows the variance argument right after the scaling it explains (ORDER puts it later in menus)
SHEET = SheetSection("forward", (
    Formula(r"\operatorname{Var}(q \cdot k) = \sum_{r=1}^{d_k} \operatorname{Var}(q_r k_r) = d_k",
            "formulas.variance.sum"),
    Formula(r"\operatorname{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = \frac{d_k}{d_k} = 1",
            "formulas.variance.scaled"),
    Formula(r"d_k = 64: \quad \sigma(q \cdot k) = \sqrt{64} = 8, \qquad \sigma\!\left(\frac{q \cdot k}{8}\right) = 1",
            "formulas.variance.example"),
), position=35)
