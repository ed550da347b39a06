"""ALiBi: linear biases in place of position embeddings. Head h of H gets the slope m_h = 2^(−8h/H) and
adds −m_h (i − j) to the scaled score of query i and an earlier key j (the causal mask hides later keys):

    slope = m_h,   bias_ij = −m_h (i − j)  (j ≤ i),  −∞  (j > i)
    masked = scores / √d_k + bias,   A = softmax(masked)            (A from level 2)
    level 3: two heads, slope = [m_h1, m_h2], A1 and A2 (their biases and masked scores on the way)

Every part is a step record (slope, bias, masked, A and a head's A1, A2), so grading, carry-forward, the
budget and the diagnosis are the registry's, and so are the mistakes: the slope of the neighbouring head (h
counted from 0), −m|i − j| over the whole row (as if it were not causal), the bias with the wrong sign, the
bias added to the weights after the softmax, the bias divided by √d_k with the scores. Exercises stored
before version 2 call the scores S (RENAMED).

Axes: B candidates, n tokens.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ... import solutions
from ...core import pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.model import Exercise
from ...core.numbers import matrices
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids
from .._shared.rows import softmax_step

ID = "alibi"
ORDER = 88  # after rope (84) and positional (86): the third way to tell attention where a token is
VERSION = 2
LEVELS = (1, 2, 3)
BIAS_MISTAKES = ("alibi_slope_off_by_one", "alibi_not_causal", "alibi_bias_sign", "alibi_bias_after_softmax",
                 "alibi_bias_scaled")
# ALiBi's own mistakes and every other record's that reaches its parts (the scaling's, the softmax's)
GUARDS = (*BIAS_MISTAKES, "no_scaling", "scaled_by_dk", "scaled_times_sqrt_dk", "softmax_columns", "no_exp",
          "softmax_no_normalise", "mask_zero_instead_of_inf")
RENAMED = {"S": "scores"}  # the given names of exercises stored before version 2
# level: (n, score values, d_k to draw from, (H, heads asked) to draw from)
SIZES = {1: (3, (0, 1, 2), (1,), ((8, (1,)), (8, (2,)), (4, (1,)), (16, (2,)))),
         2: (3, (-2, -1, 0, 1, 2), (1, 4), ((8, (1,)), (8, (2,)), (4, (1,)), (16, (2,)), (16, (4,)))),
         3: (4, (-2, -1, 0, 1, 2, 3), (4,), ((8, (1, 2)), (16, (2, 4))))}
EXP_GRID = {2: (ExpSeries(1, 4, -12, 8),), 3: (ExpSeries(1, 4, -12, 8),)}
BATCH = 8  # nearly every candidate is kept: a few suffice


def part_names(level: int, heads: int) -> list[str]:
    if heads > 1:
        return ["slope", *(f"A{k + 1}" for k in range(heads))]
    return ["slope", "bias", "masked"] + (["A"] if level > 1 else [])


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of score matrices sharing d_k and the heads asked."""
    n, values, widths, models = SIZES[level]
    H, heads = models[int(rng.integers(len(models)))]
    d_k = int(widths[int(rng.integers(len(widths)))])
    given = {"scores": matrices(rng, BATCH, (n, n), values),  # (B, n, n)
             "h": np.repeat(np.array([heads], dtype=float), BATCH, axis=0)}  # (B, heads)
    given.update(d_k=d_k, H=H)
    params = {"n": n, "H": H, "d_k": d_k, "heads": ", ".join(str(h) for h in heads)}
    return Batch(given, ("scores", "h"), part_names(level, len(heads)), params=params, keep=_teaches, decimals=2)


def _teaches(env) -> np.ndarray:
    """Per candidate: the plain scores of the lower triangle are not all equal."""
    lower = np.tril(np.ones(env["scores"].shape[-2:], dtype=bool))
    S = np.where(lower, env["scores"], np.nan)
    return np.nanmax(S, axis=(1, 2)) > np.nanmin(S, axis=(1, 2))


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    if len(ex.given["h"]) > 1:
        return ("kind.alibi.prompt", "kind.alibi.prompt_heads")
    return ("kind.alibi.prompt", "kind.alibi.prompt_one", *(("kind.alibi.prompt_softmax",) if "A" in ex.part_names
                                                             else ()))


# ---------------------------------------------------------------- worked solution


def _slope_step(ex: Exercise) -> solutions.Step:
    part, H = ex.part("slope"), int(ex.given["H"])
    heads = [int(h) for h in ex.given["h"]]

    def derive(_: int, k: int) -> solutions.CellDerivation:
        h = heads[k]
        exponent = L.number(-8 * h / H)
        latex = L.chain(L.cell("m", 0, k), r"2^{-8 h / H}", rf"2^{{-8 \cdot {h} / {H}}}", f"2^{{{exponent}}}",
                        L.number(float(part.reference[0, k])))
        return solutions.CellDerivation(latex, msg("solution.alibi.slope.cell", h=h, H=H))

    return solutions.make_step("slope", msg("solution.alibi.slope"), part.reference, part.decimals, symbol="m",
                               formula=r"2^{-8h/H}", exact_cells=[[L.number(float(x)) for x in part.reference[0]]],
                               note=msg("solution.alibi.slope.note", H=H), derive=derive)


def _bias_step(ex: Exercise, bias: np.ndarray, m: float) -> solutions.Step:
    def derive(i: int, j: int) -> solutions.CellDerivation:
        here = L.cell("B", i, j)
        if j > i:
            return solutions.CellDerivation(rf"{here} = -\infty \quad (j = {j + 1} > i = {i + 1})",
                                            msg("solution.alibi.future"))
        terms = [[solutions.number(L.number(-m), L.to_exact(-m)), solutions.number(str(i - j))]]
        latex, sub = solutions.worked_chain(here, L.number(bias[i, j]), float(bias[i, j]), 2,
                                            L.product(L.number(-m), f"({i + 1} - {j + 1})"), "sum", terms,
                                            r"-m\,(i - j)")
        return solutions.CellDerivation(latex, msg("solution.alibi.bias.cell", back=i - j), (sub,))

    cells = [[r"-\infty" if np.isneginf(x) else L.number(x) for x in row] for row in bias]
    return solutions.make_step("bias", msg("solution.alibi.bias", m=_plain(m)), bias, 2, symbol="B",
                               lhs=L.entry("B", "ij"),
                               formula=r"\begin{cases} -m\,(i - j) & j \le i \\ -\infty & j > i \end{cases}",
                               exact_cells=cells, note=msg("solution.alibi.bias.note"), derive=derive)


def _plain(m: float) -> str:
    """A slope as plain text (1/2, 1/16): for titles, which are not LaTeX."""
    return str(Fraction(m).limit_denominator(1024))


def _heads(ex: Exercise) -> list[np.ndarray]:
    """Each head's biased scores (the masked record's value, a matrix per head)."""
    masked = pipeline.reference_env(ex)["masked"]
    return list(masked.reshape(-1, *masked.shape[-2:]))


def _masked_step(ex: Exercise, env: dict) -> solutions.Step:
    d_k = int(ex.given["d_k"])
    z, bias, masked = env["scaled"], env["bias"], env["masked"]
    scaled = "S" if d_k == 1 else rf"\frac{{S}}{{\sqrt{{{d_k}}}}}"

    def derive(i: int, j: int) -> solutions.CellDerivation:
        here = L.cell(r"\tilde{Z}", i, j)
        if j > i:
            return solutions.CellDerivation(rf"{here} = -\infty", msg("solution.alibi.future"))
        terms = [[solutions.number(L.number(z[i, j]), L.to_exact(z[i, j]))],
                 [solutions.number(L.number(bias[i, j]), L.to_exact(bias[i, j]))]]
        latex, sub = solutions.worked_chain(here, L.number(masked[i, j]), float(masked[i, j]), 2,
                                            f"{L.number(z[i, j])} + ({L.number(bias[i, j])})", "sum", terms,
                                            rf"{L.cell('S', i, j)}{'' if d_k == 1 else rf' / {math.isqrt(d_k)}'} + "
                                            rf"{L.cell('B', i, j)}")
        return solutions.CellDerivation(latex, None, (sub,))

    cells = [[r"-\infty" if np.isneginf(x) else L.number(x) for x in row] for row in masked]
    return solutions.make_step("masked", msg("solution.alibi.masked"), masked, 2, symbol=r"\tilde{Z}",
                               formula=f"{scaled} + B", exact_cells=cells, note=msg("solution.alibi.masked.note"),
                               derive=derive)


def solve(ex: Exercise) -> list[solutions.Step]:
    """The slopes, then per head the bias, the biased scores and (where asked) the weights: the records' values."""
    steps = [_slope_step(ex)]
    env = pipeline.reference_env(ex)
    slopes = np.ravel(env["slope"])
    if len(slopes) == 1:
        steps += [_bias_step(ex, env["bias"], float(slopes[0])), _masked_step(ex, env)]
        if "A" in ex.part_names:
            steps.append(softmax_step(env["masked"], ex.part("A"), msg("solution.alibi.softmax")))
        return steps
    for k, (m, masked) in enumerate(zip(slopes, _heads(ex))):
        head = int(ex.given["h"][k])
        steps.append(softmax_step(masked, ex.part(f"A{k + 1}"), msg("solution.alibi.head", h=head, m=_plain(float(m))),
                                  msg("solution.alibi.head.note", h=head)))
    return steps


def aids(ex: Exercise) -> solutions.Aids:
    """The eˣ grid of each head's softmax (none at level 1), the given shapes."""
    if not any(name.startswith("A") for name in ex.part_names):
        return solutions.Aids(exp_table=(), sqrt_dk=None, shapes=solutions.shapes_of(ex))
    return softmax_aids(ex, [{"masked": masked, "causal": False} for masked in _heads(ex)])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"\tilde{Z} = \frac{Q K^{\top}}{\sqrt{d_k}} - m_h (i - j)")
SHEET = SheetSection("forward", (
    Formula(r"m_h = 2^{-8h/H}, \qquad h = 1, \dots, H", "formulas.alibi.slope"),
    Formula(r"[[\tilde{Z} | n | n]] = \frac{S}{\sqrt{d_k}} + B, \qquad B_{ij} = \begin{cases} -m_h (i - j) & j \le i "
            r"\\ -\infty & j > i \end{cases}", "formulas.alibi.bias"),
))
