"""FlashAttention's online softmax: one query's row of scores read a tile of keys at a time.

    m_t = max(m_{t−1}, max_{j ∈ tile t} s_j)                       the running maximum     (T × 1)
    ℓ_t = e^(m_{t−1} − m_t) ℓ_{t−1} + Σ_{j ∈ t} e^(s_j − m_t)        the running sum         (T × 1)
    o_t = e^(m_{t−1} − m_t) o_{t−1} + Σ_{j ∈ t} e^(s_j − m_t) v_j    the output accumulator  (T × d_v)
    O = o_T / ℓ_T  (= softmax(s) V exactly: the solution shows both)                            (1 × d_v)

Row t of m, l and O_acc holds the values after tile t. Level 3 is causal: the keys after the query are
−∞ in s, and a tile of them is skipped whole (its row repeats the one before). Every part is a step record,
so grading, carry-forward, reach, minutes and diagnosis are the registry's, as are the mistakes: no rescale
when the maximum moves, the rescale inverted, ℓ divided out per tile, the tile's own maximum as the row's.

Axes: B candidates, n_k keys in T tiles, d_v.
"""

from __future__ import annotations

import numpy as np

from attention_core.ops import softmax

from ... import solutions
from ...core import pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.model import Exercise
from ...core.numbers import choice, matrices
from ...core.sampler import Batch
from ...core.steps import STEP_BY_NAME
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids
from .._shared.hand import carried

ID = "online_softmax"
ORDER = 58  # after the softmax (50) and temperature (56): the same softmax, a tile at a time
VERSION = 1
LEVELS = (1, 2, 3)
GUARDS = ("online_no_rescale", "online_rescale_inverted", "online_divide_per_tile", "online_tile_max")
PARTS = ["m", "l", "O_acc", "O"]
# level: (keys n_k, tile, d_v, score values, value entries, query positions (causal) or None)
SIZES = {1: (4, 2, 1, (0, 1, 2), (-1, 1, 2), None),
         2: (6, 2, 1, (-2, -1, 0, 1, 2), (-2, -1, 1, 2), None),
         3: (8, 2, 2, (-2, -1, 0, 1, 2, 3), (-2, -1, 0, 1, 2), (5, 6))}
EXP_GRID = {1: (ExpSeries(1, 1, -4, 0),), 2: (ExpSeries(1, 1, -6, 0),), 3: (ExpSeries(1, 1, -6, 0),)}
BATCH = 64


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of score rows and values sharing the tiling (and, causal, the query's position)."""
    n_k, tile, d_v, values, v_values, positions = SIZES[level]
    S = matrices(rng, BATCH, (1, n_k), values)  # (B, 1, n_k)
    params = {"n_k": n_k, "tile": tile, "tiles": n_k // tile, "d_v": d_v}
    if positions is not None:
        p = int(choice(rng, positions))
        S[..., p:] = -np.inf  # the keys after the query
        params["position"] = p
    given = {"S": S, "V": matrices(rng, BATCH, (n_k, d_v), v_values), "tile": tile,
             "causal": positions is not None}
    return Batch(given, ("S", "V"), list(PARTS), params=params, keep=_teaches, decimals=2)


def _teaches(env) -> np.ndarray:
    """Per candidate: the maximum moves up after the first tile (the rescale shows), the output is not 0,
    and no column of the visible values is constant."""
    m = env["m"][..., 0]  # (B, T)
    moved = (np.diff(m, axis=1) > 0).any(axis=1)
    visible = np.isfinite(env["S"][:, 0, :])[..., None]  # (B, n_k, 1)
    V = env["V"]
    spread = (np.where(visible, V, -np.inf).max(axis=1) > np.where(visible, V, np.inf).min(axis=1)).all(axis=1)
    return moved & spread & (np.abs(env["O"]) > 1e-9).any(axis=(1, 2))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """The step records run from the given row and the learner's `values` (the engine's default chain), as the
    kind's own: Check my work offers none of the attention pass's inputs (G_O, a memory H …) beside S and V."""
    return dict(pipeline.run({**ex.given, **values}, rounding=rounding))


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    return ("kind.online_softmax.prompt", *(("kind.online_softmax.prompt_causal",) if ex.given["causal"] else ()),
            "kind.online_softmax.prompt_parts")


# ---------------------------------------------------------------- worked solution


def _e(x: float) -> solutions.Number:
    """e^x as the table gives it (e⁰ = 1 exactly)."""
    if x == 0:
        return solutions.number("1")
    text = L.decimal(float(np.exp(x)), L.EXP_PLACES)
    return solutions.number(text, None, True)


def _tiles(ex: Exercise) -> list[tuple[int, int, np.ndarray]]:
    s = np.asarray(ex.given["S"], dtype=float)[0]
    tile = int(ex.given["tile"])
    return [(t, start, s[start:start + tile]) for t, start in enumerate(range(0, len(s), tile))]


def _m_step(ex: Exercise) -> solutions.Step:
    m = ex.part("m").reference[:, 0]
    tiles = _tiles(ex)

    def derive(t: int, _: int) -> solutions.CellDerivation:
        _, start, keys = tiles[t]
        shown = ", ".join(r"-\infty" if np.isneginf(x) else L.number(x) for x in keys)
        before = r"-\infty" if t == 0 or np.isneginf(m[t - 1]) else L.number(m[t - 1])
        if np.isneginf(keys).all():
            return solutions.CellDerivation(rf"m_{{{t + 1}}} = m_{{{t}}} = {before}", msg("solution.online.skip"))
        latex = L.chain(rf"m_{{{t + 1}}}", rf"\max\left(m_{{{t}}},\ {shown}\right)",
                        rf"\max\left({before},\ {shown}\right)", L.number(m[t]))
        first = t == 0 or np.isneginf(m[t - 1])
        key = "first" if first else "m.moved" if m[t] > m[t - 1] else "m.kept"
        return solutions.CellDerivation(latex, msg(f"solution.online.{key}"))

    lhs, formula = STEP_BY_NAME["m"].formula_latex.split(" = ", 1)
    return solutions.make_step("m", msg("solution.online.m"), m[:, None], 0, symbol="m", lhs=lhs, formula=formula,
                               exact_cells=[[r"-\infty" if np.isneginf(x) else L.number(x)] for x in m],
                               note=msg("solution.online.m.note"), derive=derive)


def _running_step(ex: Exercise, name: str) -> solutions.Step:
    """ℓ_t or o_t from the one before, rescaled, and the tile's terms: e^x from the table, earlier values as
    written (rounded)."""
    part = ex.part(name)
    m = ex.part("m").reference[:, 0]
    V = np.asarray(ex.given["V"], dtype=float)
    tiles = _tiles(ex)
    is_l, symbol = name == "l", STEP_BY_NAME[name].symbol

    def derive(t: int, c: int) -> solutions.CellDerivation:
        _, start, keys = tiles[t]
        here = rf"{symbol}_{{{t + 1}}}" if is_l else rf"o_{{{t + 1},{c + 1}}}"
        if np.isneginf(keys).all():
            previous = rf"{symbol}_{{{t}}}" if is_l else rf"o_{{{t},{c + 1}}}"
            value = L.decimal(part.reference[t, c], part.decimals)
            exact = L.is_exact_decimal(value, part.reference[t, c])
            return solutions.CellDerivation(L.chain(here, previous, ("=" if exact else L.APPROX, value)),
                                            msg("solution.online.skip"))
        terms = []
        rescaled = t > 0 and np.isfinite(m[t - 1])
        if rescaled:
            terms.append([_e(m[t - 1] - m[t]), carried(part.reference[t - 1, c], part.decimals)])
        for j, x in enumerate(keys):
            if np.isfinite(x):
                terms.append([_e(x - m[t])] + ([] if is_l else [solutions.number(L.number(V[start + j, c]))]))
        numbers = L.total([L.product(*(n.text for n in group)) for group in terms])
        symbolic = (rf"e^{{m_{{{t}}} - m_{{{t + 1}}}}} {symbol}_{{{t}}} + " if t > 0 else "") + \
            r"\sum_{j \in " + str(t + 1) + "} e^{s_j - m_{" + str(t + 1) + "}}" + ("" if is_l else " v_j")
        latex, sub = solutions.worked_chain(here, None, float(part.reference[t, c]), part.decimals, numbers, "sum",
                                            terms, symbolic)
        return solutions.CellDerivation(latex, msg("solution.online.rescale" if rescaled else "solution.online.first"),
                                        (sub,))

    lhs, formula = STEP_BY_NAME[name].formula_latex.split(" = ", 1)
    return solutions.make_step(name, msg(f"solution.online.{name}"), part.reference, part.decimals,
                               symbol=symbol, lhs=lhs, formula=formula,
                               note=msg(f"solution.online.{name}.note"), derive=derive)


def _output_step(ex: Exercise) -> solutions.Step:
    part, l, o = ex.part("O"), ex.part("l"), ex.part("O_acc")
    T = l.reference.shape[0]

    def derive(_: int, c: int) -> solutions.CellDerivation:
        top, bottom = carried(o.reference[-1, c], o.decimals), carried(l.reference[-1, 0], l.decimals)
        latex, sub = solutions.worked_chain(L.cell("O", 0, c), None, float(part.reference[0, c]), part.decimals,
                                            L.frac(top.text, bottom.text), "quotient", [[top], [bottom]],
                                            rf"o_{{{T},{c + 1}}} / \ell_{{{T}}}")
        return solutions.CellDerivation(latex, msg("solution.online.O.cell"), (sub,))

    return solutions.make_step("O", msg("solution.online.O"), part.reference, part.decimals, symbol="O",
                               formula=rf"\frac{{o_{{{T}}}}}{{\ell_{{{T}}}}}", note=msg("solution.online.O.note"),
                               derive=derive)


def _check_step(ex: Exercise) -> solutions.Step:
    """The same output in one pass: softmax(s) V, the weights written out."""
    s = np.asarray(ex.given["S"], dtype=float)
    a = softmax(s)  # (1, n_k)
    part = ex.part("O")
    weights = ", ".join(L.decimal(x, part.decimals) for x in a[0])

    def derive(_: int, c: int) -> solutions.CellDerivation:
        latex = L.chain(L.cell("O", 0, c), rf"\sum_j \operatorname{{softmax}}(s)_j\, v_{{j,{c + 1}}}",
                        (L.APPROX, L.decimal(part.reference[0, c], part.decimals)))
        return solutions.CellDerivation(latex, msg("solution.online.check.cell"))

    return solutions.make_step("check", msg("solution.online.check"), part.reference, part.decimals, symbol="O",
                               formula=r"\operatorname{softmax}(s)\, V", derive=derive,
                               work=[(r"\operatorname{softmax}(s)", L.APPROX, rf"\left({weights}\right)")],
                               note=msg("solution.online.check.note"))


def solve(ex: Exercise) -> list[solutions.Step]:
    """m, ℓ and o tile by tile, O = o / ℓ, and the same O from the plain softmax in one pass."""
    return [_m_step(ex), _running_step(ex, "l"), _running_step(ex, "O_acc"), _output_step(ex), _check_step(ex)]


def aids(ex: Exercise) -> solutions.Aids:
    """The eˣ grid: every exponent s_j − m_t and m_{t−1} − m_t lies on it."""
    m = ex.part("m").reference[:, 0]
    needed = [float(x - m[t]) for t, _, keys in _tiles(ex) for x in keys if np.isfinite(x)]
    needed += [float(m[t - 1] - m[t]) for t in range(1, len(m)) if np.isfinite(m[t - 1]) and m[t] > m[t - 1]]
    return softmax_aids(ex, [{"masked": np.array([sorted(set(needed))]), "causal": False}])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"\ell_t = e^{m_{t-1} - m_t}\,\ell_{t-1} + \sum_{j \in t} e^{s_j - m_t}")
SHEET = SheetSection("forward", (
    Formula(r"m_t = \max\left(m_{t-1},\ \max_{j \in t} s_j\right)", "formulas.online_softmax.max"),
    Formula(r"\ell_t = e^{m_{t-1} - m_t}\,\ell_{t-1} + \sum_{j \in t} e^{s_j - m_t}, \qquad "
            r"o_t = e^{m_{t-1} - m_t}\,o_{t-1} + \sum_{j \in t} e^{s_j - m_t}\,v_j", "formulas.online_softmax.running"),
    Formula(r"O = \frac{o_T}{\ell_T} = \operatorname{softmax}(s)\,V", "formulas.online_softmax.exact"),
))
