"""FlashAttention's online softmax: one query's row of scores read a tile of keys at a time.

    m_t = max(m_{t−1}, max_{j ∈ tile t} s_j)                       the running maximum     (T × 1)
    ℓ_t = e^(m_{t−1} − m_t) ℓ_{t−1} + Σ_{j ∈ t} e^(s_j − m_t)        the running sum         (T × 1)
    o_t = e^(m_{t−1} − m_t) o_{t−1} + Σ_{j ∈ t} e^(s_j − m_t) v_j    the output accumulator  (T × d_v)
    O = o_T / ℓ_T  (= softmax(s) V exactly: the solution shows both)                            (1 × d_v)

Row t of m, l and O_acc holds the values after tile t. Level 3 is causal: the keys after the query are
−∞ in s, and a tile of them is skipped whole (its row repeats the one before). Its own mistakes: no rescale
when the maximum moves, the rescale the wrong way round (e^(m_new − m_old)), the accumulator divided by ℓ
after every tile, the tile's own maximum used as the row's.

Axes: B candidates, n_k keys in T tiles, d_v.
"""

from __future__ import annotations

import numpy as np

from attention_core.online_softmax import online_softmax
from attention_core.ops import softmax

from ... import solutions
from ...core import budget
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.model import Exercise, Part
from ...core.numbers import choice, matrices, round_half_up
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids
from .._shared.hand import carried, own_diagnosis

ID = "online_softmax"
ORDER = 58  # after the softmax (50) and temperature (56): the same softmax, a tile at a time
VERSION = 1
LEVELS = (1, 2, 3)
GUARDS = ()  # no step record makes these parts: the kind's own mistakes are kept apart instead
MISTAKES = ("online_no_rescale", "online_rescale_inverted", "online_divide_per_tile", "online_tile_max")
PARTS = ["m", "l", "O_acc", "O"]
# level: (keys n_k, tile, d_v, score values, value entries, query positions (causal) or None)
SIZES = {1: (4, 2, 1, (0, 1, 2), (-1, 1, 2), None),
         2: (6, 2, 1, (-2, -1, 0, 1, 2), (-2, -1, 1, 2), None),
         3: (8, 2, 2, (-2, -1, 0, 1, 2, 3), (-2, -1, 0, 1, 2), (5, 6))}
EXP_GRID = {1: (ExpSeries(1, 1, -4, 0),), 2: (ExpSeries(1, 1, -6, 0),), 3: (ExpSeries(1, 1, -6, 0),)}
TABLE = L.EXP_PLACES  # e^x as the table gives it
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
    own = {mid: f for mid, f in MISTAKE_VALUES.items() if mid != "online_tile_max" or n_k // tile > 2}
    return Batch(given, ("S", "V"), list(PARTS), params=params, keep=_teaches, derive=_parts, decimals=2,
                 sources={name: () for name in PARTS}, own=own)


def _parts(env) -> dict[str, np.ndarray]:
    tr = online_softmax(env["S"][..., 0, :], env["V"], int(env["tile"]))
    return {"m": tr.m[..., None], "l": tr.l[..., None], "O_acc": tr.o, "O": tr.O}  # (B, T, 1) … (B, 1, d_v)


def _teaches(env) -> np.ndarray:
    """Per candidate: the maximum moves up after the first tile (the rescale shows), the output is not 0,
    and no column of the visible values is constant."""
    m = env["m"][..., 0]  # (B, T)
    moved = (np.diff(m, axis=1) > 0).any(axis=1)
    visible = np.isfinite(env["S"][:, 0, :])[..., None]  # (B, n_k, 1)
    V = env["V"]
    spread = (np.where(visible, V, -np.inf).max(axis=1) > np.where(visible, V, np.inf).min(axis=1)).all(axis=1)
    return moved & spread & (np.abs(env["O"]) > 1e-9).any(axis=(1, 2))


def _walk(S: np.ndarray, V: np.ndarray, tile: int, rescale: int = 1, per_tile: bool = False,
          tile_max: bool = False) -> dict[str, np.ndarray]:
    """The tiles in order, made the way a mistake makes them: `rescale` +1 right, −1 inverted, 0 none;
    `per_tile`: o divided by ℓ after each tile (and carried on so); `tile_max`: each tile's own maximum
    as m, nothing rescaled. S (B, n_k), V (B, n_k, d_v)."""
    B, n_k = S.shape
    m, l, o = np.full(B, -np.inf), np.zeros(B), np.zeros((B, V.shape[-1]))
    ms, ls, os_ = [], [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, n_k, tile):
            part = S[:, start:start + tile]
            own_max = part.max(axis=1)
            skipped = np.isneginf(own_max)
            m_new = np.where(skipped, m, own_max if tile_max else np.maximum(m, own_max))
            base = np.where(np.isfinite(m_new), m_new, 0.0)
            factor = np.where(np.isfinite(m), np.exp(rescale * (np.where(np.isfinite(m), m, 0.0) - base)), 0.0)
            if tile_max:
                factor = np.where(np.isfinite(m), 1.0, 0.0)
            p = np.exp(part - base[:, None])  # (B, tile)
            l_new = factor * l + p.sum(axis=1)
            o_new = factor[:, None] * o + (p[:, None, :] @ V[:, start:start + tile])[:, 0]
            if per_tile:
                o_new = o_new / l_new[:, None]
            m, l, o = m_new, np.where(skipped, l, l_new), np.where(skipped[:, None], o, o_new)
            ms.append(m), ls.append(l), os_.append(o)
    O = o if per_tile else o / l[:, None]
    return {"m": np.stack(ms, 1)[..., None], "l": np.stack(ls, 1)[..., None], "O_acc": np.stack(os_, 1),
            "O": O[:, None, :]}


def _mistake(keep: tuple[str, ...], **how):
    def made(env) -> dict[str, np.ndarray]:
        out = _walk(env["S"][..., 0, :], env["V"], int(env["tile"]), **how)
        return {k: v for k, v in out.items() if k in keep}
    return made


# {mistake id: env -> {part: what it gives, stacked}}
MISTAKE_VALUES = {
    "online_no_rescale": _mistake(("l", "O_acc", "O"), rescale=0),
    "online_rescale_inverted": _mistake(("l", "O_acc", "O"), rescale=-1),
    "online_divide_per_tile": _mistake(("O_acc", "O"), per_tile=True),
    "online_tile_max": _mistake(("m", "l", "O_acc", "O"), tile_max=True),
}


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    return ("kind.online_softmax.prompt", *(("kind.online_softmax.prompt_causal",) if ex.given["causal"] else ()),
            "kind.online_softmax.prompt_parts")


# ---------------------------------------------------------------- diagnosis, carrying forward, hand work


def _as_stack(ex: Exercise) -> dict:
    env = {k: (np.asarray(v, dtype=float)[None] if k in ("S", "V") else v) for k, v in ex.given.items()}
    return {**env, **_parts(env)}


def mistakes_of(ex: Exercise, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} of this exercise."""
    env = _as_stack(ex)
    tiles = len(_tiles(ex))  # from the given data: a learner's own row (check my work) has no params
    made = {mid: f(env) for mid, f in MISTAKE_VALUES.items() if mid != "online_tile_max" or tiles > 2}
    return {mid: values[name][0] for mid, values in made.items() if name in values}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex, part.name))


def _table(x: np.ndarray, rounding: int | None) -> np.ndarray:
    """e^x as a careful student reads it: from the table (3 places) when rounding, else exact."""
    return np.exp(x) if rounding is None else round_half_up(np.exp(x), TABLE)


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """The tiles walked from the learner's m (else the right one): e^x from the table and ℓ, o rounded as
    written after each tile (`rounding` places; None: exact), O from the learner's last ℓ and o."""
    env = {name: np.asarray(x, dtype=float) for name, x in values.items()}
    s = np.asarray(ex.given["S"], dtype=float)[0]
    V, tile = np.asarray(ex.given["V"], dtype=float), int(ex.given["tile"])
    m = env["m"][:, 0] if "m" in env else _as_stack(ex)["m"][0, :, 0]
    prev, l, o = -np.inf, 0.0, np.zeros(V.shape[1])
    ls, os_ = [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for t, start in enumerate(range(0, len(s), tile)):
            if np.isfinite(m[t]):
                factor = _table(prev - m[t], rounding) if np.isfinite(prev) else 0.0
                p = _table(s[start:start + tile] - m[t], rounding)
                l = round_half_up(factor * l + p.sum(), rounding)
                o = round_half_up(factor * o + p @ V[start:start + tile], rounding)
            prev = m[t]
            ls.append(l), os_.append(o)
    env.setdefault("m", m[:, None])
    env.setdefault("l", np.array(ls, dtype=float)[:, None])
    env.setdefault("O_acc", np.array(os_, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        env.setdefault("O", round_half_up(env["O_acc"][-1:] / env["l"][-1, 0], rounding))
    return env


def operations(ex: Exercise) -> budget.Operations:
    """Per tile: the maximum, an exponential per visible key (e⁰ free) and for a moved maximum, the rescaled
    ℓ and o, e^(s − m) v for each key; the final division; every cell written."""
    s = np.asarray(ex.given["S"], dtype=float)[0]
    V, tile = np.asarray(ex.given["V"], dtype=float), int(ex.given["tile"])
    m = ex.part("m").reference[:, 0]
    d_v = V.shape[1]
    total, prev = budget.NONE, -np.inf
    for t, start in enumerate(range(0, len(s), tile)):
        keys = s[start:start + tile]
        seen = np.isfinite(keys)
        if not seen.any():
            continue
        moved = np.isfinite(prev) and m[t] > prev
        exps = int(np.count_nonzero(keys[seen] != m[t])) + int(moved)
        terms = budget.product_operations(np.exp(keys[seen] - m[t])[None], V[start:start + tile][seen])
        total = total + budget.Operations(exponentials=exps, additions=int(seen.sum()) + d_v,
                                          multiply_adds=(1 + d_v) * int(moved)) + terms
        prev = m[t]
    total = total + budget.Operations(divisions=d_v)
    return total + budget.Operations(cells=sum(int(np.prod(p.shape)) for p in ex.parts))


# ---------------------------------------------------------------- worked solution


def _e(x: float) -> solutions.Number:
    """e^x as the table gives it (e⁰ = 1 exactly)."""
    if x == 0:
        return solutions.number("1")
    text = L.decimal(float(np.exp(x)), TABLE)
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

    return solutions.make_step("m", msg("solution.online.m"), m[:, None], 0, symbol="m", lhs="m_t",
                               formula=r"\max\left(m_{t-1},\ \max_{j \in t} s_j\right)",
                               exact_cells=[[r"-\infty" if np.isneginf(x) else L.number(x)] for x in m],
                               note=msg("solution.online.m.note"), derive=derive)


def _running_step(ex: Exercise, name: str) -> solutions.Step:
    """ℓ_t or o_t from the one before, rescaled, and the tile's terms: e^x from the table, earlier values as
    written (rounded)."""
    part = ex.part(name)
    m = ex.part("m").reference[:, 0]
    V = np.asarray(ex.given["V"], dtype=float)
    tiles = _tiles(ex)
    is_l = name == "l"
    symbol = r"\ell" if is_l else "o"

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

    formula = (r"e^{m_{t-1} - m_t}\,\ell_{t-1} + \sum_{j \in t} e^{s_j - m_t}" if is_l
               else r"e^{m_{t-1} - m_t}\,o_{t-1} + \sum_{j \in t} e^{s_j - m_t}\, v_j")
    return solutions.make_step(name, msg(f"solution.online.{name}"), part.reference, part.decimals,
                               symbol=symbol if is_l else "o", lhs=f"{symbol}_t", formula=formula,
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
