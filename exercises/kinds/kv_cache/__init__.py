"""The KV cache: one decoding step of a causal decoder.

The t tokens decoded so far left their keys and values in the cache (K_cache, V_cache: t rows). The
new token brings its own q, k, v (one row each):

    K = [K_cache; k],  V = [V_cache; v]          # (t+1) × d_k, (t+1) × d_v: appended as the last row
    s = q Kᵀ,  a = softmax(s / √d_k),  o = a V    # 1 × (t+1), 1 × (t+1), 1 × d_v
    cache_floats = 2 · n · h · (t+1) · d_head     # a model of n layers, h heads, d_head per head

No mask: the new token is the last position, it sees every cached one and itself; o is the last row of
full causal attention over the t+1 tokens (the solution says so, the tests check it). The mistakes are
this kind's own (kv_* in its locales: the new key left out, the new position masked, the stale V, the
new row put first, the query cached in the place of the key, a cache size of K or V alone, before the
step, of one layer or one head) and the catalogued scaling and softmax ones on this row; no pipeline step
makes these parts, so the kind keeps them apart itself (generate), from the answers and from what a
careful student who rounds each value writes.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from attention_core import softmax
from attention_core.kv_cache import cache_floats, decode_step

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, decimals_for, round_half_up
from ...i18n import msg

ID = "kv_cache"
ORDER = 78  # after cross_attention, before multi_head: the decoder at inference time
VERSION = 1
LEVELS = (1, 2, 3)
GUARDS = ()  # no pipeline step makes these parts: the kind keeps its own mistakes apart (generate)

# level: (cached tokens t to draw from, d_k to draw from, d_v, entries of K_cache, q, k; entries of V_cache, v)
SIZES = {1: ((2,), (1,), 1, (0, 1, 2), (0, 1, 2)),
         2: ((3,), (2, 4), 1, (-1, 0, 1), (-2, -1, 1, 2)),
         3: ((3, 4), (4,), 2, (-1, 0, 1, 2), (-2, -1, 0, 1, 2))}
# the model of the cache-size part: n layers, h heads, d_head per head (K and V alike); h = 2 would make
# "one head" look like "K or V alone", so it is never drawn
LAYERS = (3, 4, 6, 12)
HEADS = (4, 8, 12)
D_HEAD = (8, 16, 64)
MAX_SCALED = 4.0  # |s / √d_k|: the eˣ table stays short
MAX_TRIES = 2000
PARTS = ("K", "V", "scores", "A", "O", "cache_floats")


def _given_rows(given: dict) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(given[k], dtype=float) for k in ("K_cache", "V_cache", "q", "k", "v"))


def references_of(given: dict, params: dict) -> dict[str, np.ndarray]:
    """Every part through attention_core (its KV-cache decoding step and cache size)."""
    K_cache, V_cache, q, k, v = _given_rows(given)
    step = decode_step(K_cache, V_cache, q, k, v, int(given["d_k"]))
    size = cache_floats(params["layers"], params["heads"], K_cache.shape[0] + 1, params["d_head"])
    return {"K": step.K, "V": step.V, "scores": step.scores, "A": step.A, "O": step.O,
            "cache_floats": np.array([[float(size)]])}


def _draw(rng: np.random.Generator, level: int) -> tuple[dict, dict]:
    """The given values and the prompt's params, in the order the generator draws them."""
    ts, widths, d_v, key_values, value_values = SIZES[level]
    from ...core.numbers import nonzero_matrix

    t, d_k = int(choice(rng, ts)), int(choice(rng, widths))
    given = {"K_cache": nonzero_matrix(rng, (t, d_k), key_values),  # (t, d_k): keys of the tokens decoded so far
             "V_cache": nonzero_matrix(rng, (t, d_v), value_values),  # (t, d_v): their values
             "q": nonzero_matrix(rng, (1, d_k), key_values),  # (1, d_k): the new token's query
             "k": nonzero_matrix(rng, (1, d_k), key_values),  # (1, d_k): its key
             "v": nonzero_matrix(rng, (1, d_v), value_values),  # (1, d_v): its value
             "d_k": d_k}
    params = {"t": t, "t1": t + 1, "d_k": d_k, "d_v": d_v, "layers": int(choice(rng, LAYERS)),
              "heads": int(choice(rng, HEADS)), "d_head": int(choice(rng, D_HEAD))}
    return given, params


WHOLE = ("K", "V", "scores", "cache_floats")  # whole numbers from whole entries: decimals_for gives 0


def _parts(refs: dict[str, np.ndarray], level: int) -> list[Part]:
    decimals = spec(level).decimals
    return [Part(name=name, shape=ref.shape, reference=ref,
                 decimals=0 if name in WHOLE else decimals_for(ref, decimals)) for name, ref in refs.items()]


def _draft(rng: np.random.Generator, level: int) -> Draft:
    given, params = _draw(rng, level)
    return Draft(given=given, parts=_parts(references_of(given, params), level), params=params)


def _teaches(draft: Draft) -> bool:
    return _teaches_refs({p.name: p.reference for p in draft.parts}, draft.given["d_k"])


def _teaches_refs(refs: dict[str, np.ndarray], d_k: int) -> bool:
    """Small exponents; not all scores equal (uniform weights say nothing) and the new token's own score
    not equal to every other; values that differ; no part all zeros."""
    Z = refs["scores"] / math.sqrt(d_k)
    V = refs["V"]
    return bool(np.abs(Z).max() <= MAX_SCALED and np.ptp(Z) > 0 and np.all(np.ptp(V, axis=0) > 0)
                and np.abs(refs["O"]).max() > 1e-9)


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A decoding step whose mistakes all differ from the answers, from each other and from what a careful
    student who rounds writes (to 2 decimals too), and that fits the level's time budget.

    The checks are pure functions of the draw, so their order only sets the cost: the references
    first (no parts for a draw that teaches nothing), every part's mistakes computed once for both
    mistake checks, the time budget (which rarely fails) last."""
    from ...core import budget, misconceptions
    from .._shared.fast import all_clash_free, clash_free

    for _ in range(MAX_TRIES):
        given, params = _draw(rng, level)
        if not _sizes_apart(params):
            continue
        refs = references_of(given, params)
        if not _teaches_refs(refs, given["d_k"]):
            continue
        parts = _parts(refs, level)
        K = parts[0]  # the cheapest of the mistakes' checks, and the one that fails most (q = k)
        if not clash_free(K.reference, _key_mistakes(given), misconceptions.separation(K)):
            continue
        mistakes = _mistakes(given, params)
        if not all_clash_free(parts[1:-1], mistakes):  # K and the cache size checked already
            continue
        ex = Exercise(kind=ID, seed=0, level=level, version=VERSION, given=given, parts=tuple(parts), params=params)
        if _apart_from_careful(ex, mistakes, apart_from_answers=True) \
                and (_most_minutes(params) <= budget.BUDGET_MINUTES[level]
                     or _operations(ex).minutes <= budget.BUDGET_MINUTES[level]):
            return Draft(given=given, parts=parts, params=params)
    raise RuntimeError(f"kv_cache: no variant in {MAX_TRIES} draws")


def _most_minutes(params: dict) -> float:
    """An upper bound of _operations(ex).minutes from the sizes alone (every product term a multiply-add,
    every score nonzero): when it fits the budget, the exact count does too."""
    from ...core import budget

    t1, d_k, d_v = params["t1"], params["d_k"], params["d_v"]
    worst = budget.Operations(multiply_adds=d_k * t1 + t1 * d_v + 4, divisions=(t1 if d_k != 1 else 0) + t1,
                              exponentials=t1, additions=t1 - 1,
                              cells=t1 * d_k + t1 * d_v + 2 * t1 + d_v + 1)  # K, V, scores, A, O, the size
    return worst.minutes


def _sizes_apart(params: dict) -> bool:
    """The cache-size part's check (hand.all_apart on it) without arrays: its answer and its four mistakes
    are whole numbers, so two of them are within the part's separation (< 1) only when equal."""
    n, h, d, t = params["layers"], params["heads"], params["d_head"], params["t"]
    sizes = [cache_floats(n, h, t + 1, d), *_size_mistakes(n, h, d, t).values()]
    return len(set(sizes)) == len(sizes)


def _size_mistakes(n: int, h: int, d: int, t: int) -> dict[str, int]:
    return {"kv_cache_size_one_of_k_v": n * h * (t + 1) * d, "kv_cache_size_before_step": 2 * n * h * t * d,
            "kv_cache_size_one_layer": 2 * h * (t + 1) * d, "kv_cache_size_one_head": 2 * n * (t + 1) * d}


def _key_mistakes(given: dict) -> dict[str, np.ndarray]:
    """The mistakes of K alone (as _mistakes gives them)."""
    K_cache, _, q, k, _ = _given_rows(given)
    return {"kv_new_row_first": np.vstack([k, K_cache]), "kv_query_cached": np.vstack([K_cache, q])}


def _apart_from_careful(ex: Exercise, mistakes: dict[str, dict[str, np.ndarray]] | None = None,
                        apart_from_answers: bool = False) -> bool:
    """No mistake's value of a part is within the part's separation of that part as a careful student
    computes it with every value rounded to the declared decimals (it would be graded right).
    `apart_from_answers`: the mistakes are known to be apart from the answers (all_clash_free), so a part
    the careful student gets exactly right needs no second look."""
    from ...core import misconceptions
    from ...core.grading import declared_decimals
    from .._shared.fast import apart_from

    # K, V and the scores are whole, so a careful student writes them exactly: the references
    known = {name: ex.part(name).reference for name in ("K", "V", "scores")} if apart_from_answers else {}
    careful = chain(ex, known, declared_decimals(ex))
    mistakes = _mistakes(ex.given, ex.params) if mistakes is None else mistakes
    return all(apart_from(careful[part.name], mistakes.get(part.name, {}), misconceptions.separation(part))
               for part in ex.parts
               if not (apart_from_answers and np.array_equal(careful[part.name], part.reference)))


# ---------------------------------------------------------------- mistakes, diagnosis, carrying forward


def mistakes_of(given: dict, params: dict, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} (only those of the part's shape can match)."""
    return _mistakes(given, params).get(name, {})


def _mistakes(given: dict, params: dict) -> dict[str, dict[str, np.ndarray]]:
    """{part name: {mistake id: what it gives for that part}}, every part at once."""
    K_cache, V_cache, q, k, v = _given_rows(given)
    d_k = int(given["d_k"])
    root = math.sqrt(d_k)
    t = K_cache.shape[0]
    K, V = np.vstack([K_cache, k]), np.vstack([V_cache, v])  # (t+1, d_k), (t+1, d_v)
    K_first, V_first = np.vstack([k, K_cache]), np.vstack([v, V_cache])  # the new row put first
    K_query = np.vstack([K_cache, q])  # the query cached in the place of the key
    S = q @ K.T  # (1, t+1)
    A = softmax(S / root)
    S_first, S_query = q @ K_first.T, q @ K_query.T
    # each softmax once, each used for A's mistake and O's: whole entries make q K_cacheᵀ exactly S's first t
    seen = softmax(S[:, :t] / root)  # (1, t): the new position hidden as if it were in the future
    A_found = {"kv_new_row_masked": np.zeros_like(A)}
    A_found["kv_new_row_masked"][:, :t] = seen
    A_found.update(kv_new_row_first=softmax(S_first / root), kv_query_cached=softmax(S_query / root))
    if d_k != 1:
        A_found.update(no_scaling=softmax(S), scaled_by_dk=softmax(S / d_k), scaled_times_sqrt_dk=softmax(S * root))
    total = (S / root).sum()
    if abs(total) > 1e-9:
        A_found["no_exp"] = S / root / total
    A_found["softmax_no_normalise"] = np.exp(S / root)
    # with the new position masked (A's last weight 0) the output is this same stale one
    O_found = {"kv_new_key_left_out": seen @ V_cache,  # attention over the cache alone
               "kv_stale_value": A[:, :t] @ V_cache,  # the new weight dropped with the missing row of V
               "kv_query_cached": A_found["kv_query_cached"] @ V}
    if d_k != 1:
        O_found.update(no_scaling=A_found["no_scaling"] @ V, scaled_by_dk=A_found["scaled_by_dk"] @ V)
    sizes = _size_mistakes(params["layers"], params["heads"], params["d_head"], t)
    return {"K": {"kv_new_row_first": K_first, "kv_query_cached": K_query}, "V": {"kv_new_row_first": V_first},
            "scores": {"kv_new_row_first": S_first, "kv_query_cached": S_query}, "A": A_found,
            "O": O_found, "cache_floats": {mid: np.array([[float(x)]]) for mid, x in sizes.items()}}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    from .._shared.hand import own_diagnosis

    return own_diagnosis(part, value, mistakes_of(ex.given, ex.params, part.name))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """K and V from the cache unless the learner gave them, the scores from their K, A from their scores
    (the unasked s/√d_k rounded too), O from their A and V, the cache size from the model (each computed
    value rounded half-up to `rounding` places; None: exact)."""
    env = {name: np.asarray(x, dtype=float) for name, x in values.items()}
    K_cache, V_cache, q, k, v = _given_rows(ex.given)
    root = math.sqrt(int(ex.given["d_k"]))
    # each value computed only when the learner did not give it (setdefault would compute it anyway)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if "K" not in env:
            env["K"] = np.vstack([K_cache, k])
        if "V" not in env:
            env["V"] = np.vstack([V_cache, v])
        if "scores" not in env:
            env["scores"] = round_half_up(q @ env["K"].T, rounding)
        if "A" not in env:
            env["A"] = round_half_up(softmax(round_half_up(env["scores"] / root, rounding)), rounding)
        if "O" not in env:
            env["O"] = round_half_up(env["A"] @ env["V"], rounding)
    p = ex.params
    if "cache_floats" not in env:
        env["cache_floats"] = np.array([[float(cache_floats(p["layers"], p["heads"], p["t1"], p["d_head"]))]])
    return env


def _operations(ex: Exercise):
    """The two rows copied into the caches, q Kᵀ, the division by √d_k, the softmax of one row, A V, the
    four factors of the cache size; every cell written."""
    from ...core import budget

    g = ex.given
    refs = {p.name: p.reference for p in ex.parts}
    total = budget.product_operations(np.asarray(g["q"], dtype=float), refs["K"].T)
    d_k = int(g["d_k"])
    if d_k != 1:
        total = total + budget.Operations(divisions=int(np.count_nonzero(refs["scores"])))
    Z = refs["scores"] / math.sqrt(d_k)
    width = Z.shape[1]
    total = total + budget.Operations(exponentials=int(np.count_nonzero(np.abs(Z) > 1e-12)),
                                      additions=width - 1, divisions=width)
    total = total + budget.product_operations(refs["A"], refs["V"])
    total = total + budget.Operations(multiply_adds=4)  # 2 · n · h · (t+1) · d_head
    return total + budget.Operations(cells=sum(int(np.prod(p.shape)) for p in ex.parts))


def operations(ex: Exercise):
    return _operations(ex)


# ---------------------------------------------------------------- worked solution


def _append_step(ex: Exercise, name: str, cache: str, row: str):
    """K (or V): the cache's t rows as they are, the new row below them."""
    from ... import solutions
    from ...rendering import latex as L

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
    from ... import solutions

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
    from ... import solutions
    from ...rendering import latex as L

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
    from ... import solutions
    part = ex.part("cache_floats")
    p = ex.params
    factors = ["2", str(p["layers"]), str(p["heads"]), str(p["t1"]), str(p["d_head"])]
    value = int(part.reference[0, 0])
    product = r" \cdot ".join(factors)
    latex, sub = solutions.worked_chain(r"\text{floats}", str(value), float(value), 0, product, "sum",
                                        [[solutions.number(f) for f in factors]],
                                        r"2 \cdot n \cdot h \cdot (t+1) \cdot d_{\text{head}}")

    def derive(_: int, __: int):
        return solutions.CellDerivation(latex, msg("solution.kv_cache.size.cell"), (sub,))

    return solutions.make_step("cache_floats", msg("solution.kv_cache.size"), part.reference, 0,
                               symbol=r"\text{floats}", formula=r"2 \cdot n \cdot h \cdot (t+1) \cdot d_{\text{head}}",
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
    from ... import solutions

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
    Formula(r"\text{floats} = 2 \cdot n_{\text{layers}} \cdot h \cdot (t+1) \cdot d_{\text{head}}",
            "formulas.kv_cache.size"),
))
