"""Temperature and logit soft-capping: softmax(s / τ) of one row for a few τ, and c·tanh(s / c).

    a_τ = softmax(s / τ)          τ < 1 sharpens the weights, τ > 1 flattens them (√d_k is a temperature)
    s_capped = c · tanh(s / c),   a_capped = softmax(s_capped)        (levels 2 and 3)

τ is never 1 (multiplying by τ, the catalogued mistake, would give the same). tanh and the eˣ of a capped
score are read from a fixed table in the prompt (every whole score of the level's range, not only the
problem's). Every part is a step record (a_tau1 …, s_capped, a_capped), so grading, carry-forward, the
budget and the diagnosis are the registry's, and so are the mistakes: s · τ for s / τ, the cap after the
softmax, the cap forgotten.

Axes: B candidates, n scores in one row.
"""

from __future__ import annotations

import math

import numpy as np

from ... import solutions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.model import Exercise
from ...core.numbers import matrices
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids
from .._shared.rows import softmax_step

ID = "temperature"
ORDER = 56  # after the softmax: what reshapes it
VERSION = 2
LEVELS = (1, 2, 3)
GUARDS = ("temperature_times_tau", "temperature_cap_after_softmax", "temperature_cap_forgotten")
# level: (n scores, their values, the temperatures asked (in order), the cap or None)
SIZES = {1: (3, (0, 1, 2), (0.5, 2.0), None),
         2: (3, (-2, -1, 0, 1, 2), (0.5, 2.0), 2.0),
         3: (4, (-2, -1, 0, 1, 2, 3), (0.5, 2.0, 4.0), 2.0)}
# the eˣ aid of the a_τ rows: s / τ on these grids (halves and, for τ = 4, quarters)
EXP_GRID = {1: (ExpSeries(1, 2, 0, 8),), 2: (ExpSeries(1, 2, -8, 8),),
            3: (ExpSeries(1, 4, -2, 3), ExpSeries(1, 2, -8, 12))}
TABLE_PLACES = 3
BATCH = 48


def tau_parts(level: int) -> list[str]:
    return [f"a_tau{k + 1}" for k in range(len(SIZES[level][2]))]


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of score rows of the level's size; the level's temperatures and cap."""
    n, values, taus, cap = SIZES[level]
    given = {"s": matrices(rng, BATCH, (1, n), values), "tau": np.array([taus])}  # (B, 1, n); τ (1, k)
    names = tau_parts(level)
    if cap is not None:
        given["cap"] = cap
        names += ["s_capped", "a_capped"]
    params = {"n": n, "tau_text": ", ".join(_tau_text(t) for t in taus),
              "tau_parts": ", ".join(names[:len(taus)]), "cap": _tau_text(cap or 0), "table": cap_table(level)}
    return Batch(given, ("s",), names, params=params, keep=_teaches, decimals=2)


def _tau_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else {0.5: "1/2", 0.25: "1/4"}[float(x)]


def _teaches(env) -> np.ndarray:
    """Per candidate: the scores not all equal (uniform weights at every τ teach nothing), and at least two
    different largest-to-smallest gaps (τ visibly sharpens one pair more than another)."""
    s = env["s"][:, 0]  # (B, n)
    gaps = np.sort(s, axis=1)[:, 1:] - np.sort(s, axis=1)[:, :-1]
    return (np.ptp(s, axis=1) > 0) & (np.ptp(gaps, axis=1) > 0)


def cap_table(level: int) -> str:
    """tanh(x / c) and e^(c·tanh(x / c)) for every whole x of the level's range (the prompt's table)."""
    _, values, _, cap = SIZES[level]
    if cap is None:
        return ""
    rows = []
    for x in values:
        t = math.tanh(x / cap)
        rows.append(f"x = {x}: tanh(x/{_tau_text(cap)}) ≈ {t:.{TABLE_PLACES}f}, "
                    f"e^({_tau_text(cap)}·tanh(x/{_tau_text(cap)})) ≈ {math.exp(cap * t):.{TABLE_PLACES}f}")
    return "; ".join(rows)


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    return ("kind.temperature.prompt", *(("kind.temperature.prompt_cap",) if "cap" in ex.given else ()))


# ---------------------------------------------------------------- worked solution


def _tau_step(ex: Exercise, k: int) -> solutions.Step:
    tau = float(np.ravel(ex.given["tau"])[k])
    z = np.asarray(ex.given["s"], dtype=float) / tau
    part = ex.part(f"a_tau{k + 1}")
    note = "sharper" if tau < 1 else "flatter"
    return softmax_step(z, part, msg("solution.temperature.tau", tau=_tau_text(tau)),
                        msg(f"solution.temperature.{note}", tau=_tau_text(tau)))


def _capped_step(ex: Exercise) -> solutions.Step:
    part = ex.part("s_capped")
    s, c = np.asarray(ex.given["s"], dtype=float), float(ex.given["cap"])
    c_text = _tau_text(c)

    def derive(i: int, j: int) -> solutions.CellDerivation:
        x = s[i, j]
        t_text = L.decimal(math.tanh(x / c), TABLE_PLACES)
        rounded = not L.is_exact_decimal(t_text, math.tanh(x / c))
        pair = [(solutions.number(c_text), solutions.number(t_text, None, rounded))]
        middle = rf"{c_text} \operatorname{{tanh}}\left(\frac{{{L.number(x)}}}{{{c_text}}}\right)"
        latex, sub = solutions.worked_chain(L.cell(r"\hat{s}", i, j), None, float(part.reference[i, j]),
                                            part.decimals, L.product(c_text, t_text), "sum", pair, middle)
        return solutions.CellDerivation(latex, msg("solution.temperature.cap.cell"), (sub,))

    formula = rf"{c_text} \operatorname{{tanh}}\left(\frac{{s}}{{{c_text}}}\right)"
    return solutions.make_step("s_capped", msg("solution.temperature.cap", cap=c_text), part.reference, part.decimals,
                               symbol=r"\hat{s}", formula=formula,
                               note=msg("solution.temperature.cap.note", cap=c_text), derive=derive)


def solve(ex: Exercise) -> list[solutions.Step]:
    """Each temperature's softmax (the registry's softmax on s / τ), then the capped scores and their softmax."""
    steps = [_tau_step(ex, k) for k in range(np.size(ex.given["tau"]))]
    if "cap" in ex.given:
        steps += [_capped_step(ex), softmax_step(ex.part("s_capped").reference, ex.part("a_capped"),
                                                 msg("solution.temperature.capped_softmax"),
                                                 msg("solution.temperature.capped_softmax.note"))]
    return steps


def aids(ex: Exercise) -> solutions.Aids:
    """The eˣ grid of the a_τ rows (the capped ones read e^(c·tanh) from the prompt's table)."""
    s = np.asarray(ex.given["s"], dtype=float)
    return softmax_aids(ex, [{"masked": s / t, "causal": False} for t in np.ravel(ex.given["tau"])])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"\operatorname{softmax}(s / \tau),\ c \operatorname{tanh}(s / c)")
SHEET = SheetSection("forward", (
    Formula(r"a = \operatorname{softmax}\!\left(\frac{s}{\tau}\right), \qquad \tau \to 0:\ \text{one-hot}, \qquad "
            r"\tau \to \infty:\ \frac{1}{n}", "formulas.temperature.tau"),
    Formula(r"\operatorname{softmax}\!\left(\frac{q K^{\top}}{\sqrt{d_k}}\right): \quad \tau = \sqrt{d_k}",
            "formulas.temperature.sqrt_dk"),
    Formula(r"\hat{s} = c \operatorname{tanh}\!\left(\frac{s}{c}\right) \in (-c, c), \qquad "
            r"a = \operatorname{softmax}(\hat{s})",
            "formulas.temperature.cap"),
))
