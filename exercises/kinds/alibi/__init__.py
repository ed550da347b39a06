"""ALiBi: linear biases in place of position embeddings. Head h of H gets the slope m_h = 2^(−8h/H) and
adds −m_h (i − j) to the scaled score of query i and an earlier key j (the causal mask hides later keys):

    slope = m_h,   bias_ij = −m_h (i − j)  (j ≤ i),  −∞  (j > i)
    masked = S / √d_k + bias,   A = softmax(masked)                 (A from level 2)
    level 3: two heads, slope = [m_h1, m_h2], A1 and A2 (their biases and masked scores on the way)

Its own mistakes: the slope of the neighbouring head (h counted from 0), −m|i − j| over the whole row (as
if it were not causal), the bias with the wrong sign, the bias added to the weights after the softmax,
the bias divided by √d_k with the scores.

Axes: B candidates, n tokens.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from attention_core.alibi import alibi_bias, alibi_slope
from attention_core.ops import softmax

from ... import solutions
from ...core import budget
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.model import Exercise, Part
from ...core.numbers import matrices, round_half_up
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids
from .._shared.hand import own_diagnosis
from .._shared.rows import softmax_step

ID = "alibi"
ORDER = 88  # after rope (84) and positional (86): the third way to tell attention where a token is
VERSION = 1
LEVELS = (1, 2, 3)
GUARDS = ()  # no step record makes these parts: the kind's own mistakes are kept apart instead
MISTAKES = ("alibi_slope_off_by_one", "alibi_not_causal", "alibi_bias_sign", "alibi_bias_after_softmax",
            "alibi_bias_scaled")
# level: (n, score values, d_k to draw from, (H, heads asked) to draw from)
SIZES = {1: (3, (0, 1, 2), (1,), ((8, (1,)), (8, (2,)), (4, (1,)), (16, (2,)))),
         2: (3, (-2, -1, 0, 1, 2), (1, 4), ((8, (1,)), (8, (2,)), (4, (1,)), (16, (2,)), (16, (4,)))),
         3: (4, (-2, -1, 0, 1, 2, 3), (4,), ((8, (1, 2)), (16, (2, 4))))}
EXP_GRID = {2: (ExpSeries(1, 4, -12, 8),), 3: (ExpSeries(1, 4, -12, 8),)}
BATCH = 48


def part_names(level: int, heads: int) -> list[str]:
    if heads > 1:
        return ["slope", *(f"A{k + 1}" for k in range(heads))]
    return ["slope", "bias", "masked"] + (["A"] if level > 1 else [])


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of score matrices sharing d_k and the heads asked."""
    n, values, widths, models = SIZES[level]
    H, heads = models[int(rng.integers(len(models)))]
    d_k = int(widths[int(rng.integers(len(widths)))])
    given = {"S": matrices(rng, BATCH, (n, n), values), "d_k": d_k, "H": H, "h": np.array(heads, dtype=float)}
    names = part_names(level, len(heads))
    params = {"n": n, "H": H, "d_k": d_k, "heads": ", ".join(str(h) for h in heads)}
    return Batch(given, ("S",), names, params=params, keep=_teaches, derive=_parts, decimals=2,
                 sources={name: () for name in names}, own=MISTAKE_VALUES)


def _teaches(env) -> np.ndarray:
    """Per candidate: every query past the first sees keys whose biased scores differ, and the plain scores
    of the lower triangle are not all equal."""
    lower = np.tril(np.ones(env["S"].shape[-2:], dtype=bool))
    S = np.where(lower, env["S"], np.nan)
    return np.nanmax(S, axis=(1, 2)) > np.nanmin(S, axis=(1, 2))


def _run(env, slopes: np.ndarray, bias_of=alibi_bias, after: bool = False, scaled_bias: bool = False) -> dict:
    """The parts from the slopes of the heads asked; `bias_of(n, m)` builds a head's bias; `after`: the bias
    added to the weights; `scaled_bias`: (S + bias) / √d_k."""
    S = np.asarray(env["S"], dtype=float)  # (B, n, n)
    n, root = S.shape[-1], math.sqrt(env["d_k"])
    out = {"slope": np.broadcast_to(slopes, (len(S), 1, len(slopes))).copy()}
    for k, m in enumerate(slopes):
        bias = bias_of(n, float(m))  # (n, n)
        if after:
            A = softmax(S / root + alibi_bias(n, 0.0))
            A = np.where(np.isfinite(bias), A + bias, 0.0)
            masked = None
        else:
            masked = (S + bias) / root if scaled_bias else S / root + bias
            A = softmax(masked)
        suffix = f"{k + 1}" if len(slopes) > 1 else ""
        out[f"A{suffix}"] = A
        if not suffix:
            out["bias"] = np.broadcast_to(bias, S.shape).copy()
            if masked is not None:
                out["masked"] = masked
    return out


def _parts(env) -> dict[str, np.ndarray]:
    return _run(env, alibi_slope(env["h"], env["H"]))


def _not_causal(n: int, m: float) -> np.ndarray:
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return -m * np.abs(i - j) + 0.0


def _sign(n: int, m: float) -> np.ndarray:
    return np.where(np.isfinite(alibi_bias(n, m)), -alibi_bias(n, m), -np.inf) + 0.0


def _only(*names: str):
    """A mistake's values restricted to the parts it changes."""
    def pick(values: dict) -> dict:
        return {k: v for k, v in values.items() if k.rstrip("0123456789") in names or k in names}
    return pick


MISTAKE_VALUES = {
    "alibi_slope_off_by_one": lambda env: _run(env, alibi_slope(env["h"] - 1, env["H"])),
    "alibi_not_causal": lambda env: _only("bias", "masked", "A")(_run(env, alibi_slope(env["h"], env["H"]),
                                                                       _not_causal)),
    "alibi_bias_sign": lambda env: _only("bias", "masked", "A")(_run(env, alibi_slope(env["h"], env["H"]), _sign)),
    "alibi_bias_after_softmax": lambda env: _only("A")(_run(env, alibi_slope(env["h"], env["H"]), after=True)),
    "alibi_bias_scaled": lambda env: {} if env["d_k"] == 1 else _only("masked", "A")(
        _run(env, alibi_slope(env["h"], env["H"]), scaled_bias=True)),
}


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    if len(ex.given["h"]) > 1:
        return ("kind.alibi.prompt", "kind.alibi.prompt_heads")
    return ("kind.alibi.prompt", "kind.alibi.prompt_one", *(("kind.alibi.prompt_softmax",) if "A" in ex.part_names
                                                             else ()))


# ---------------------------------------------------------------- diagnosis, carrying forward, hand work


def _as_stack(ex: Exercise) -> dict:
    env = {k: (np.asarray(v, dtype=float)[None] if k == "S" else v) for k, v in ex.given.items()}
    return {**env, **_parts(env)}


def mistakes_of(ex: Exercise, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} of this exercise."""
    env = _as_stack(ex)
    with np.errstate(invalid="ignore"):
        made = {mid: mistaken(env) for mid, mistaken in MISTAKE_VALUES.items()}
    return {mid: values[name][0] for mid, values in made.items() if name in values}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex, part.name))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """The slopes, each head's bias from the learner's slope, the masked scores from their bias, the weights
    from their masked scores (each computed value rounded half-up to `rounding` places; None: exact)."""
    env = {name: np.asarray(x, dtype=float) for name, x in values.items()}
    S = np.asarray(ex.given["S"], dtype=float)
    n, root = len(S), math.sqrt(int(ex.given["d_k"]))
    env.setdefault("slope", alibi_slope(ex.given["h"], ex.given["H"])[None, :])
    heads = len(ex.given["h"])
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(heads):
            suffix = f"{k + 1}" if heads > 1 else ""
            bias = env.get("bias") if not suffix else None
            if bias is None:
                bias = round_half_up(alibi_bias(n, float(np.ravel(env["slope"])[k])), rounding)
            masked = env.get("masked") if not suffix else None
            if masked is None:
                masked = round_half_up(round_half_up(S / root, rounding) + bias, rounding)
            if not suffix:
                env.setdefault("bias", bias)
                env.setdefault("masked", masked)
            env.setdefault(f"A{suffix}", round_half_up(softmax(masked), rounding))
    return env


def operations(ex: Exercise) -> budget.Operations:
    """Per head: the slope (one power of 2), −m (i − j) below the diagonal, S / √d_k, the sums, the softmax
    where asked; every cell written."""
    S = np.asarray(ex.given["S"], dtype=float)
    n, d_k = len(S), int(ex.given["d_k"])
    below = n * (n - 1) // 2
    lower = S[np.tril_indices(n)]
    total = budget.Operations(divisions=int(np.count_nonzero(lower)) if d_k != 1 else 0)
    for m in alibi_slope(ex.given["h"], ex.given["H"]):
        total = total + budget.Operations(exponentials=1, multiply_adds=below, additions=below)
        if any(name.startswith("A") for name in ex.part_names):
            total = total + budget.softmax_operations(S / math.sqrt(d_k) + alibi_bias(n, float(m)))
    return total + budget.Operations(cells=sum(int(np.prod(p.shape)) for p in ex.parts))


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


def _bias_step(ex: Exercise, m: float, name: str = "bias") -> solutions.Step:
    n = len(ex.given["S"])
    bias = alibi_bias(n, m)

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
    return solutions.make_step(name, msg("solution.alibi.bias", m=_plain(m)), bias, 2, symbol="B",
                               lhs=L.entry("B", "ij"),
                               formula=r"\begin{cases} -m\,(i - j) & j \le i \\ -\infty & j > i \end{cases}",
                               exact_cells=cells, note=msg("solution.alibi.bias.note"), derive=derive)


def _plain(m: float) -> str:
    """A slope as plain text (1/2, 1/16): for titles, which are not LaTeX."""
    return str(Fraction(m).limit_denominator(1024))


def _masked_values(ex: Exercise, m: float) -> np.ndarray:
    S = np.asarray(ex.given["S"], dtype=float)
    return S / math.sqrt(int(ex.given["d_k"])) + alibi_bias(len(S), m)


def _masked_step(ex: Exercise, m: float) -> solutions.Step:
    S = np.asarray(ex.given["S"], dtype=float)
    d_k = int(ex.given["d_k"])
    z = S / math.sqrt(d_k)
    masked = _masked_values(ex, m)
    bias = alibi_bias(len(S), m)
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
    """The slopes, then per head the bias, the biased scores and (where asked) the weights."""
    steps = [_slope_step(ex)]
    slopes = alibi_slope(ex.given["h"], ex.given["H"])
    if len(slopes) == 1:
        steps += [_bias_step(ex, float(slopes[0])), _masked_step(ex, float(slopes[0]))]
        if "A" in ex.part_names:
            steps.append(softmax_step(ex.part("masked").reference, ex.part("A"), msg("solution.alibi.softmax")))
        return steps
    for k, m in enumerate(slopes):
        head = int(ex.given["h"][k])
        steps.append(softmax_step(_masked_values(ex, float(m)), ex.part(f"A{k + 1}"),
                                  msg("solution.alibi.head", h=head, m=_plain(float(m))),
                                  msg("solution.alibi.head.note", h=head)))
    return steps


def aids(ex: Exercise) -> solutions.Aids:
    """The eˣ grid of each head's softmax (none at level 1), the given shapes."""
    if not any(name.startswith("A") for name in ex.part_names):
        return solutions.Aids(exp_table=(), sqrt_dk=None, shapes=solutions.shapes_of(ex))
    return softmax_aids(ex, [{"masked": _masked_values(ex, float(m)), "causal": False}
                             for m in alibi_slope(ex.given["h"], ex.given["H"])])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"\tilde{Z} = \frac{Q K^{\top}}{\sqrt{d_k}} - m_h (i - j)")
SHEET = SheetSection("forward", (
    Formula(r"m_h = 2^{-8h/H}, \qquad h = 1, \dots, H", "formulas.alibi.slope"),
    Formula(r"[[\tilde{Z} | n | n]] = \frac{S}{\sqrt{d_k}} + B, \qquad B_{ij} = \begin{cases} -m_h (i - j) & j \le i "
            r"\\ -\infty & j > i \end{cases}", "formulas.alibi.bias"),
))
