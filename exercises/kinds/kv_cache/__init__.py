"""The KV cache: one decoding step of a causal decoder.

The t tokens decoded so far left their keys and values in the cache (K_cache, V_cache: t rows). The
new token brings its own q, k, v (one row each):

    K = [K_cache; k],  V = [V_cache; v]          # (t+1) × d_k, (t+1) × d_v: appended as the last row
    s = q Kᵀ,  a = softmax(s / √d_k),  o = a V    # 1 × (t+1), 1 × (t+1), 1 × d_v
    cache_floats = 2 · L · h · (t+1) · d_head     # a model of L layers, h heads, d_head per head

No mask: the new token is the last position, it sees every cached one and itself; o is the last row of
full causal attention over the t+1 tokens (the solution says so). No step record computes these parts
from what is given (q, not Q), so the kind derives them and keeps its own mistakes apart (`mistakes`: the
new row put first, the query cached in the place of the key, the new position masked or left out, the
stale V, a cache size of K or V alone, before the step, of one layer or one head, and the scaling and
softmax slips on this one row).

Axes: B candidates, t cached tokens, d_k, d_v.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from attention_core import softmax
from attention_core.kv_cache import cache_floats
from attention_core.ops import scores as q_times_k

from ... import solutions
from ...core import budget
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, matrices, no_zero_lines, round_half_up
from ...core.reach import Reach, over_root, softmax_by_hand
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.hand import own_diagnosis

ID = "kv_cache"
ORDER = 78  # after cross_attention, before multi_head: the decoder at inference time
VERSION = 6
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {1: (ExpSeries(1, 1, 0, 4),),
            2: (ExpSeries(1, 2, -4, 4), ExpSeries(1, 2, -2, 2, root=2),),
            3: (ExpSeries(1, 2, -8, 8),)}
GUARDS = ()  # no step record makes these parts: the kind's own `mistakes` are kept apart instead

# level: (cached tokens t to draw from, d_k to draw from, d_v, entries of K_cache, q, k; entries of V_cache, v)
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("kv_new_row_first", "kv_query_cached", "kv_new_row_masked", "kv_new_key_left_out", "kv_stale_value",
            "kv_cache_not_appended", "kv_cache_size_one_of_k_v", "kv_cache_size_before_step",
            "kv_cache_size_one_layer", "kv_cache_size_one_head")
SIZES = {1: ((2,), (1,), 1, (0, 1, 2), (0, 1, 2)),
         2: ((3,), (2, 4), 1, (-1, 0, 1), (-2, -1, 1, 2)),
         3: ((3, 4), (4,), 2, (-1, 0, 1, 2), (-2, -1, 0, 1, 2))}
# the model of the cache-size part: L layers, h heads, d_head per head (K and V alike); h = 2 would make
# "one head" look like "K or V alone", and h = L "one head" like "one layer": neither is drawn
LAYERS = (3, 4, 6, 12)
HEADS = (4, 8, 12)
D_HEAD = (8, 16, 64)
MAX_SCALED = 4.0  # |s / √d_k|: the eˣ table stays short
SPREAD = 2.0  # |s_j − s_new| / √d_k: the new token's weight never negligible, no weight saturates
STACKED = ("K_cache", "V_cache", "q", "k", "v")
PARTS = ("K", "V", "scores", "A", "O", "cache_floats")
STATED = ("layers", "heads", "d_head")  # the model whose cache is counted: L layers, h heads, d_head per head
BATCH = 64


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of decoding steps of one shape and one model: the cache, q and k of whole entries (q, k
    and v with none zero), the sizes n, h, d_head."""
    ts, widths, d_v, key_values, value_values = SIZES[level]
    t, d_k = int(choice(rng, ts)), int(choice(rng, widths))
    nonzero_keys, nonzero_values = [x for x in key_values if x], [x for x in value_values if x]
    one_column = d_v == 1  # O is one number: a zero value would add nothing to it
    given = {"K_cache": matrices(rng, BATCH, (t, d_k), key_values),  # (B, t, d_k)
             "V_cache": matrices(rng, BATCH, (t, d_v), nonzero_values if one_column else value_values),  # (B, t, d_v)
             "q": matrices(rng, BATCH, (1, d_k), nonzero_keys),  # (B, 1, d_k): the new token's query
             "k": matrices(rng, BATCH, (1, d_k), nonzero_keys),  # (B, 1, d_k): its key
             "v": matrices(rng, BATCH, (1, d_v), nonzero_values),  # (B, 1, d_v): its value
             "d_k": d_k}
    layers = int(choice(rng, LAYERS))
    params = {"t": t, "t1": t + 1, "d_k": d_k, "d_v": d_v, "layers": layers,
              "heads": int(choice(rng, [h for h in HEADS if h != layers])), "d_head": int(choice(rng, D_HEAD))}
    # the parts read no record value: the given rows alone
    return Batch(given, STACKED, list(PARTS), params=params, keep=_hand_friendly, decimals=spec(level).decimals,
                 derive=lambda env: _step(env, params), sources={name: () for name in PARTS},
                 own=mistakes(d_k, params))


def _hand_friendly(env) -> np.ndarray:
    """Per candidate: no cached row all zeros; small exponents, every cached score near the new one's and
    not all scores equal (uniform weights teach nothing); no column of V constant; an output not zero."""
    root = math.sqrt(env["d_k"])
    ok = no_zero_lines(env["K_cache"], columns=False) & no_zero_lines(env["V_cache"], columns=False)
    S = env["scores"][:, 0]  # (B, t+1)
    ok &= (np.abs(S) <= MAX_SCALED * root + 1e-9).all(axis=1)
    ok &= (np.abs(S[:, :-1] - S[:, -1:]) <= SPREAD * root + 1e-9).all(axis=1)
    ok &= np.ptp(S, axis=1) > 0
    ok &= (np.ptp(env["V"], axis=1) > 0).all(axis=1)
    return ok & (np.abs(env["O"]) > 1e-9).any(axis=(1, 2))


def _attend(q: np.ndarray, K: np.ndarray, V: np.ndarray, divisor: float) -> tuple[np.ndarray, ...]:
    """s = q Kᵀ, a = softmax(s / divisor), o = a V, for a stack."""
    S = q_times_k(q, K)  # (B, 1, t+1)
    A = softmax(S / divisor)  # (B, 1, t+1)
    return S, A, A @ V  # (B, 1, d_v)


def _appended(cache: np.ndarray, row: np.ndarray) -> np.ndarray:
    return np.concatenate([cache, row], axis=-2)  # (B, t+1, d)


def _step(env, params: dict) -> dict[str, np.ndarray]:
    """Every part: the caches with the new rows appended, the new token's row of attention, the size."""
    K, V = _appended(env["K_cache"], env["k"]), _appended(env["V_cache"], env["v"])
    S, A, O = _attend(env["q"], K, V, math.sqrt(env["d_k"]))
    size = cache_floats(params["layers"], params["heads"], params["t1"], params["d_head"])
    return {"K": K, "V": V, "scores": S, "A": A, "O": O,
            "cache_floats": np.full((len(K), 1, 1), float(size))}  # (B, 1, 1)


def mistakes(d_k: int, params: dict) -> dict:
    """{mistake id: env -> {part: what it gives, stacked}}; the scaling slips only where √d_k ≠ 1."""
    root = math.sqrt(d_k)

    def new_row_first(env):
        K, V = _appended(env["k"], env["K_cache"]), _appended(env["v"], env["V_cache"])
        S, A, _ = _attend(env["q"], K, V, root)  # (O is the right one: the rows of K and V moved alike)
        return {"K": K, "V": V, "scores": S, "A": A}

    def query_cached(env):
        K = _appended(env["K_cache"], env["q"])
        S, A, O = _attend(env["q"], K, env["V"], root)
        return {"K": K, "scores": S, "A": A, "O": O}

    def cache_alone(env):  # attention over the cache only, as if the new position were in the future
        return _attend(env["q"], env["K_cache"], env["V_cache"], root)

    def new_row_masked(env):
        A = cache_alone(env)[1]
        return {"A": np.concatenate([A, np.zeros_like(A[..., :1])], axis=-1)}  # (B, 1, t+1), the last weight 0

    def scaled_by(divisor):
        return lambda env: dict(zip(("A", "O"), _attend(env["q"], env["K"], env["V"], divisor)[1:]))

    def no_exp(env):
        Z = env["scores"] / root
        total = Z.sum(axis=-1, keepdims=True)
        return {"A": np.where(np.abs(total) > 1e-9, Z / np.where(total == 0, 1, total), np.nan)}

    def size(floats: int):
        return lambda env: {"cache_floats": np.full((len(env["q"]), 1, 1), float(floats))}

    found = {"kv_new_row_first": new_row_first, "kv_query_cached": query_cached,
             "kv_new_row_masked": new_row_masked,
             "kv_new_key_left_out": lambda env: {"O": cache_alone(env)[2]},
             "kv_stale_value": lambda env: {"O": env["A"][..., :-1] @ env["V_cache"]}}
    if d_k != 1:
        found.update(no_scaling=scaled_by(1.0), scaled_by_dk=scaled_by(d_k),
                     scaled_times_sqrt_dk=lambda env: {"A": softmax(env["scores"] * root)})
    found.update(no_exp=no_exp, softmax_no_normalise=lambda env: {"A": np.exp(env["scores"] / root)})
    if all(name in params for name in STATED):  # a model is stated: its cache size can be asked
        n, h, d, t = params["layers"], params["heads"], params["d_head"], params["t"]
        found.update(kv_cache_size_one_of_k_v=size(n * h * (t + 1) * d),
                     kv_cache_size_before_step=size(2 * n * h * t * d),
                     kv_cache_size_one_layer=size(2 * h * (t + 1) * d),
                     kv_cache_size_one_head=size(2 * n * (t + 1) * d))
    return found


def stated_params(given: dict, stated: dict) -> dict:
    """The prompt's numbers for a learner's own decoding step (check my work): the model they state
    (STATED), t from their cache."""
    t = int(np.shape(given["K_cache"])[0])
    return {**{name: int(stated[name]) for name in STATED if name in stated}, "t": t, "t1": t + 1,
            "d_k": int(given["d_k"]), "d_v": int(np.shape(given["V_cache"])[1])}


# ---------------------------------------------------------------- diagnosis, carrying forward, hand work


def _as_stack(ex: Exercise) -> dict:
    """The exercise's values as a stack of one candidate (the form `mistakes` reads)."""
    env = {k: (np.asarray(v, dtype=float)[None] if k in STACKED else v) for k, v in ex.given.items()}
    return {**env, **_step(env, ex.params)}


def mistakes_of(ex: Exercise, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} of this exercise (a value no one can write, NaN, left out)."""
    env = _as_stack(ex)
    with np.errstate(divide="ignore", invalid="ignore"):
        made = {mid: mistaken(env) for mid, mistaken in mistakes(int(ex.given["d_k"]), ex.params).items()}
    return {mid: values[name][0] for mid, values in made.items()
            if name in values and not np.isnan(values[name]).any()}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex, part.name))


def diagnose_shape(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """t rows of K or V (t columns of the scores or the weights) where t + 1 are asked: the cache not appended."""
    t = int(ex.given["K_cache"].shape[0])
    stale = (t, part.shape[1]) if part.name in ("K", "V") else (1, t) if part.name in ("scores", "A") else None
    return "kv_cache_not_appended" if stale is not None and tuple(value.shape) == stale else None


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """K and V from the cache unless the learner gave them, the scores from their K, A from their scores
    (the unasked s/√d_k rounded too), O from their A and V, the cache size from the model (each computed
    value rounded half-up to `rounding` places; None: exact)."""
    env = {name: np.asarray(x, dtype=float) for name, x in values.items()}
    g = {k: np.asarray(ex.given[k], dtype=float) for k in STACKED}
    d_k = int(ex.given["d_k"])
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if "K" not in env:
            env["K"] = np.vstack([g["K_cache"], g["k"]])
        if "V" not in env:
            env["V"] = np.vstack([g["V_cache"], g["v"]])
        if "scores" not in env:
            env["scores"] = round_half_up(g["q"] @ env["K"].mT, rounding)
        if "A" not in env:
            scaled = round_half_up(over_root(env["scores"], d_k, rounding), rounding)
            by_hand = softmax_by_hand if isinstance(rounding, Reach) else lambda z, _: softmax(z)
            env["A"] = round_half_up(by_hand(scaled, rounding), rounding)
        if "O" not in env:
            env["O"] = round_half_up(env["A"] @ env["V"], rounding)
    p = ex.params
    if "cache_floats" not in env and all(name in p for name in STATED):
        env["cache_floats"] = np.array([[float(cache_floats(p["layers"], p["heads"], p["t1"], p["d_head"]))]])
    return env


def operations(ex: Exercise) -> budget.Operations:
    """The two rows copied into the caches, then q Kᵀ, the division by √d_k, the softmax of one row and A V
    as the step records count them (every value on the way written), the four factors of the cache size;
    every cell asked written."""
    refs = {p.name: p.reference for p in ex.parts}
    attention = {"Q": np.asarray(ex.given["q"], dtype=float), "K": refs["K"], "V": refs["V"],
                 "d_k": int(ex.given["d_k"]), "causal": False}
    total = budget.count(attention, ["scores", "A", "O"], written=())
    total = total + budget.Operations(multiply_adds=4)  # 2 · n · h · (t+1) · d_head
    return total + budget.parts_written(ex)


# ---------------------------------------------------------------- worked solution


def _append_step(ex: Exercise, name: str, cache: str, row: str):
    """K (or V): the cache's t rows as they are, the new row below them."""
    part = ex.part(name)
    t = int(ex.params["t"])
    cache_symbol, here = L.symbol(cache), L.symbol(name)
    cells = [[L.number(x) for x in r] for r in part.reference]

    def derive(i: int, j: int):
        source = L.cell(cache_symbol, i, j) if i < t else f"{row}_{{{j + 1}}}"
        note = (msg("solution.kv_cache.append.cached", row=i + 1) if i < t
                else msg("solution.kv_cache.append.new", row=t + 1, vector=row))
        return solutions.CellDerivation(L.chain(L.cell(here, i, j), source, cells[i][j]), note)

    formula = rf"\begin{{bmatrix}} {cache_symbol} \\ {row} \end{{bmatrix}}"
    return solutions.make_step(name, msg(f"solution.kv_cache.{name}"), part.reference, 0, symbol=here,
                               formula=formula, exact_cells=cells, note=msg("solution.kv_cache.append.note"),
                               derive=derive)


def _attention_steps(ex: Exercise) -> list:
    """s = q Kᵀ, s/√d_k, the softmax and o = a V through the registry's builders, with the new token's
    q written as q."""
    names = ("scores", "A", "O")
    places = {p.name: p.decimals for p in ex.parts}
    refs = {p.name: p.reference for p in ex.parts if p.name in names}
    stand_in = {"Q": np.asarray(ex.given["q"], dtype=float), "K": ex.part("K").reference,
                "V": ex.part("V").reference, "d_k": int(ex.given["d_k"]), "causal": False}
    ctx = solutions.build_context(stand_in, list(names), places, refs)
    ctx.symbols["Q"] = "q"
    return [solutions.BUILDERS[name](ctx, name) for name in ctx.shown]


def _check_step(ex: Exercise):
    """The output is the last row of full causal attention over the t+1 tokens: row t+1 of the causal mask
    hides nothing, so that row is exactly this computation (the earlier rows are what the cache saves)."""
    part = ex.part("O")
    t1 = int(ex.params["t1"])
    row = rf"\left(\operatorname{{softmax}}\!\left(\frac{{Q K^{{\top}}}}{{\sqrt{{d_k}}}} + M\right) V\right)_{{{t1}}}"
    cells = [[L.decimal(x, part.decimals) for x in r] for r in part.reference]

    def derive(i: int, j: int):
        return solutions.CellDerivation(L.chain(L.cell("O", i, j), L.cell(r"O_{\text{full}}", t1 - 1, j),
                                                cells[i][j]), msg("solution.kv_cache.check.cell", row=t1))

    return solutions.make_step("check", msg("solution.kv_cache.check"), part.reference, part.decimals, symbol="O",
                               formula=row, note=msg("solution.kv_cache.check.note", row=t1, t=ex.params["t"]),
                               derive=derive, work=[(rf"M_{{{t1},j}}", "=", rf"0 \quad (j \le {t1})")])


def _size_step(ex: Exercise):
    part = ex.part("cache_floats")
    p = ex.params
    factors = ["2", str(p["layers"]), str(p["heads"]), str(p["t1"]), str(p["d_head"])]
    value = int(part.reference[0, 0])
    product = r" \cdot ".join(factors)
    latex, sub = solutions.worked_chain(r"\text{floats}", str(value), float(value), 0, product, "sum",
                                        [[solutions.number(f) for f in factors]],
                                        r"2 \cdot L \cdot h \cdot (t+1) \cdot d_{\text{head}}")

    def derive(_: int, __: int):
        return solutions.CellDerivation(latex, msg("solution.kv_cache.size.cell"), (sub,))

    return solutions.make_step("cache_floats", msg("solution.kv_cache.size"), part.reference, 0,
                               symbol=r"\text{floats}", formula=r"2 \cdot L \cdot h \cdot (t+1) \cdot d_{\text{head}}",
                               exact_cells=[[str(value)]], work=[("", "=", product)],
                               note=msg("solution.kv_cache.size.note", **p), derive=derive)


def solve(ex: Exercise) -> list:
    """The caches with the new rows appended, the new token's scores, weights and output (the registry's
    builders, any cell derived), the check that this is the last row of full causal attention, and the
    cache size of the whole model."""
    return [_append_step(ex, "K", "K_cache", "k"), _append_step(ex, "V", "V_cache", "v"), *_attention_steps(ex),
            _check_step(ex), _size_step(ex)]


def aids(ex: Exercise):
    """The eˣ table and √d_k of the new token's row, with the shapes of what is given."""
    stand_in = replace(ex, given={"Q": np.asarray(ex.given["q"], dtype=float), "K": ex.part("K").reference,
                                  "V": ex.part("V").reference, "d_k": int(ex.given["d_k"]), "causal": False},
                       parts=tuple(p for p in ex.parts if p.name in ("scores", "A", "O")))
    return replace(solutions.generic_aids(stand_in), shapes=solutions.shapes_of(ex))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"K \leftarrow \begin{bmatrix} K_{\mathrm{cache}} \\ k \end{bmatrix},\ "
                           r"O = \operatorname{softmax}\!\left(\frac{q K^{\top}}{\sqrt{d_k}}\right) V")
SHEET = SheetSection("forward", (
    Formula(r"[[K | (t+1) | d_k]] = \begin{bmatrix} K_{\mathrm{cache}} \\ k \end{bmatrix}, \qquad "
            r"[[V | (t+1) | d_v]] = \begin{bmatrix} V_{\mathrm{cache}} \\ v \end{bmatrix}", "formulas.kv_cache.append"),
    Formula(r"[[O | 1 | d_v]] = \operatorname{softmax}\!\left(\frac{q K^{\top}}{\sqrt{d_k}}\right) V"
            r" = \text{row } t+1 \text{ of causal attention}", "formulas.kv_cache.row"),
    Formula(r"\text{floats} = 2 \cdot L \cdot h \cdot (t+1) \cdot d_{\text{head}}",
            "formulas.kv_cache.size"),
))
