"""Multi-head latent attention (MLA): one cached latent C = X W_DKV, each head's keys and values up-projected.

    C = X W_DKV,   K_i = C W_UK_i,   V_i = C W_UV_i,   O_i = softmax(mask(Q_i K_iᵀ / √d_k)) V_i,   Q_i = X W_Q_i
    cache_floats = d_c per token and layer   (multi-head attention: h (d_k + d_v))
    level 3, the absorbed query: W_QK_i = W_Q_i W_UK_iᵀ, and scores_i = (X W_QK_i) Cᵀ = Q_i K_iᵀ

The step records do the work: the record `latent` C = X W_DKV, and K and V read C where an exercise has one (K = C W_K,
W_K standing for W_UK); the heads are one axis of the stack (as in gqa), and the parts are slices of the
records' values. Causal at every level (a decoder's cache is what MLA shrinks). The kind's own mistakes: K and
V cached instead of C, the latent counted once per head, the up-projections swapped.

Axes: B candidates, h heads, n tokens, d = d_model, d_c latent width, d_k = d_v.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attention_core import latent

from ... import solutions
from ...core import budget, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import matrices, round_half_up
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids
from .._shared.hand import own_diagnosis

ID = "mla"
ORDER = 83  # after gqa (82): the other way to shrink the KV cache
VERSION = 3
LEVELS = (1, 2, 3)
EXP_GRID = {2: (ExpSeries(1, 1, -4, 4),), 3: (ExpSeries(1, 2, -4, 4, root=2),)}  # level 1: no softmax
GUARDS = ("transposed_scores", "no_scaling", "scaled_by_dk", "scaled_by_sqrt_d_model",
          "mask_wrong_triangle", "no_mask", "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed",
          "mask_zero_instead_of_inf", "softmax_no_normalise", "scaled_times_sqrt_dk")
MISTAKES = ("mla_cache_kv", "mla_cache_per_head", "mla_up_swapped")


@dataclass(frozen=True)
class Size:
    n: int
    d: int  # d_model
    d_c: int  # latent width (≠ d)
    h: int
    d_k: int  # = d_v
    absorbed: bool  # level 3: the absorbed query and its scores instead of K_i, V_i
    attention: bool = True  # each head's output asked (level 1: the latent, the keys and values, the cache)


SIZES = {1: Size(n=2, d=2, d_c=1, h=2, d_k=1, absorbed=False, attention=False),
         2: Size(n=2, d=2, d_c=1, h=2, d_k=1, absorbed=False),
         3: Size(n=3, d=4, d_c=2, h=2, d_k=2, absorbed=True)}
# the caches apart (d_c, h d_c, h (d_k + d_v)); n ≠ d_k, so Q K without the transpose never conforms
X_VALUES = (-1, 0, 1, 2)
WEIGHT_VALUES = (-1, 0, 1)
UP_VALUES = (-1, 1)  # the up-projections' entries: no key or value column is lost
MAX_SCORE = 4
CAUSAL = True
BATCH = 256


def heads_of(given: dict) -> int:
    return sum(1 for name in given if name.startswith("W_Q") and name[3:].isdigit())


def part_names(size: Size) -> list[str]:
    heads = range(1, size.h + 1)
    middle = ([f"W_QK{i}" for i in heads] + [f"scores{i}" for i in heads] if size.absorbed
              else [f"K{i}" for i in heads] + [f"V{i}" for i in heads])
    outputs = [f"O{i}" for i in heads] if size.attention else []
    return ["C", *middle, *outputs, "cache_floats"]


def _batch(given: dict, size: Size, decimals: int, params: dict | None = None) -> Batch:
    """The candidates stacked as the records read them: X (B, 1, n, d), W_DKV (B, 1, d, d_c), W_Q (B, h, d, d_k),
    W_UK and W_UV as W_K and W_V (B, h, d_c, d_k)."""
    h = size.h

    def derive(env):
        out = {"C": env["latent"][:, 0], "cache_floats": np.full((len(env["latent"]), 1, 1), float(size.d_c))}
        for i in range(h):  # a run that stopped early (until=…) has only some of the records' values
            if size.absorbed:
                out[f"W_QK{i + 1}"] = latent.absorbed_query(env["W_Q"][:, i], env["W_K"][:, i])
            names = ("scores", "O") if size.absorbed else ("K", "V", "O")
            out.update({f"{name}{i + 1}": env[name][:, i] for name in names if name in env})
        return out

    def swapped(env):  # K_i = C W_UV_i and V_i = C W_UK_i, through the records
        run = pipeline.run({**{k: env[k] for k in ("X", "W_Q", "latent", "d_k", "causal")}, "W_K": env["W_V"],
                            "W_V": env["W_K"]}, until={"O"})
        return {k: v for k, v in derive(run).items() if k[0] in "KVOs"}

    def cache(floats: int):
        return lambda env: {"cache_floats": np.full((len(env["X"]), 1, 1), float(floats))}

    own = {"mla_cache_kv": cache(latent.multi_head_cache_floats(h, size.d_k, size.d_k)),
           "mla_cache_per_head": cache(h * size.d_c), "mla_up_swapped": swapped}
    sources = {"C": (), "cache_floats": (), **{f"O{i}": ("O",) for i in range(1, h + 1)},
               **{f"{p}{i}": (record,) for i in range(1, h + 1)
                  for p, record in (("K", "K"), ("V", "V"), ("scores", "scores"), ("W_QK", "W_Q"))}}
    return Batch(given, ("X", "W_DKV", "W_Q", "W_K", "W_V"), part_names(size), params=params or {},
                 keep=lambda env: _hand_friendly(env, size.attention), decimals=decimals, derive=derive,
                 sources=sources, own=own,
                 shown=_shown)


def draw(rng: np.random.Generator, level: int) -> Batch:
    size = SIZES[level]
    B, h = BATCH, size.h
    X = matrices(rng, B, (size.n, size.d), X_VALUES)[:, None]  # (B, 1, n, d)
    W_DKV = matrices(rng, B, (size.d, size.d_c), WEIGHT_VALUES)[:, None]  # (B, 1, d, d_c)
    shapes = (("W_Q", (size.d, size.d_k), WEIGHT_VALUES), ("W_K", (size.d_c, size.d_k), UP_VALUES),
              ("W_V", (size.d_c, size.d_k), UP_VALUES))
    heads = {w: np.stack([matrices(rng, B, shape, values) for _ in range(h)], axis=1)  # (B, h, …)
             for w, shape, values in shapes}
    given = {"X": X, "W_DKV": W_DKV, **heads, "d_k": size.d_k, "causal": CAUSAL}
    params = {"n": size.n, "d": size.d, "d_c": size.d_c, "h": h, "d_k": size.d_k,
              "mha_floats": latent.multi_head_cache_floats(h, size.d_k, size.d_k)}
    return _batch(given, size, spec(level).decimals, params)


def _hand_friendly(env, attention: bool) -> np.ndarray:
    """Per candidate: no zero line in C, no head's keys or values all zero, two heads whose keys differ, and
    where attention is asked small whole scores that differ within the last query's row in every head, and
    heads whose outputs differ."""
    C, S, V = env["latent"][:, 0], env["scores"], env["V"]  # (B, n, d_c), (B, h, n, n), (B, h, n, d_k)
    ok = (C != 0).any(axis=2).all(axis=1) & (C != 0).any(axis=1).all(axis=1)
    ok &= (env["K"] != 0).any(axis=(2, 3)).all(axis=1) & (V != 0).any(axis=3).all(axis=(1, 2))
    ok &= (env["K"][:, 0] != env["K"][:, 1]).any(axis=(1, 2))
    if not attention:
        return ok
    ok &= (np.abs(S) <= MAX_SCORE).all(axis=(1, 2, 3))
    ok &= (S[:, :, -1].max(axis=2) > S[:, :, -1].min(axis=2)).all(axis=1)
    O = env["O"]
    return ok & (np.abs(O[:, 0] - O[:, 1]) > 0.02).any(axis=(1, 2))


def _shown(one: dict) -> dict:
    """One candidate as its exercise gives it: X, W_DKV, W_Q1 … W_Qh, W_UK1 …, W_UV1 …, d_k, causal."""
    h = len(one["W_Q"])
    given = {"X": one["X"][0], "W_DKV": one["W_DKV"][0]}
    for name, stack in (("W_Q", one["W_Q"]), ("W_UK", one["W_K"]), ("W_UV", one["W_V"])):
        given.update({f"{name}{i}": stack[i - 1] for i in range(1, h + 1)})
    return {**given, "d_k": one["d_k"], "causal": one["causal"]}


def _stacked(given: dict) -> dict:
    """An exercise's given data as the records read it, a stack of one (C recomputed from X and W_DKV)."""
    h = heads_of(given)
    X, W_DKV = (np.asarray(given[k], dtype=float) for k in ("X", "W_DKV"))

    def stack(name):
        return np.stack([np.asarray(given[f"{name}{i}"], dtype=float) for i in range(1, h + 1)])[None]

    return {"X": X[None, None], "W_DKV": W_DKV[None, None], "W_Q": stack("W_Q"),
            "W_K": stack("W_UK"), "W_V": stack("W_UV"), "d_k": int(given["d_k"]), "causal": bool(given["causal"])}


def head_given(given: dict, i: int, C: np.ndarray | None = None) -> dict:
    """Head i (1-based) as a single-head pipeline input: X, W_Q_i, the latent C, W_UK_i and W_UV_i as W_K, W_V."""
    X = np.asarray(given["X"], dtype=float)
    C = X @ np.asarray(given["W_DKV"], dtype=float) if C is None else np.asarray(C, dtype=float)
    return {"X": X, "W_Q": given[f"W_Q{i}"], "latent": C, "W_K": given[f"W_UK{i}"], "W_V": given[f"W_UV{i}"],
            "d_k": int(given["d_k"]), "causal": bool(given["causal"])}


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    size = SIZES[ex.level]
    heads = "kind.mla.heads" if size.attention else "kind.mla.up"
    return ("kind.mla.prompt", "kind.mla.absorbed" if size.absorbed else heads, "kind.mla.cache")


# ---------------------------------------------------------------- grading


def _size_of_given(ex: Exercise) -> Size:
    """The level's size with the heads and widths of the given data (a learner's own in Check my work; a
    generated exercise's are its level's)."""
    d, d_c = np.shape(ex.given["W_DKV"])
    return replace(SIZES[ex.level], n=len(ex.given["X"]), d=d, d_c=d_c, h=heads_of(ex.given), d_k=int(ex.given["d_k"]))


def mistakes_of(ex: Exercise) -> dict[str, dict[str, np.ndarray]]:
    """{part: {mistake id: what it gives}}: the kind's own mistakes, then each guarded one of the records made in
    every head (what the sampler keeps apart, for this one exercise); memoised on the (immutable) exercise."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "mla_mistakes" not in memo:
        memo["mla_mistakes"] = _mistakes_of(ex)
    return memo["mla_mistakes"]


def _mistakes_of(ex: Exercise) -> dict[str, dict[str, np.ndarray]]:
    found: dict[str, dict[str, np.ndarray]] = {}
    asked = set(ex.part_names)
    size = _size_of_given(ex)
    # an exercise asks K_i, V_i or the absorbed scores_i; Check my work's (one form for every level) asks both
    sizes = (size, replace(size, absorbed=not size.absorbed)) if {"K1", "scores1"} <= asked else (size,)

    def add(name: str, mid: str, value: np.ndarray) -> None:  # a value no one can write (NaN, ±∞) names nothing
        if name in asked and np.shape(value) == ex.part(name).shape and np.isfinite(value).all():
            found.setdefault(name, {}).setdefault(mid, value)

    for size in sizes:
        batch = _batch(_stacked(ex.given), size, spec(ex.level).decimals)
        env = batch.computed(batch.given)
        for mid, mistaken in batch.own.items():
            for name, value in mistaken(env).items():
                add(name, mid, value[0])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for mid in GUARDS:
                run = pipeline.run_mistake(batch.given, env, mid, until={"O"})
                tainted = {name for name, sources in batch.sources.items() if run.tainted & set(sources)}
                for name, value in batch.derive(run).items():
                    if name in tainted:
                        add(name, mid, value[0])
    return found


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex).get(part.name, {}))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """C from X unless given; each head from the learner's C (and K_i, V_i or scores_i where given), rounded
    half-up to `rounding` places as it is computed (None: exact)."""
    env = dict(values)
    X = np.asarray(ex.given["X"], dtype=float)
    env.setdefault("C", round_half_up(latent.latent(X, np.asarray(ex.given["W_DKV"], dtype=float)), rounding))
    for i in range(1, heads_of(ex.given) + 1):
        given = head_given(ex.given, i, env["C"])
        absorbed = SIZES[ex.level].absorbed or f"W_QK{i}" in values  # Check my work: one form for every level
        W_QK = env.setdefault(f"W_QK{i}", latent.absorbed_query(np.asarray(given["W_Q"], dtype=float),
                                                                 np.asarray(given["W_K"], dtype=float)))
        if absorbed:
            given["scores"] = env.get(f"scores{i}", round_half_up(X @ W_QK @ np.asarray(env["C"]).T, rounding))
        for name in ("K", "V"):
            if f"{name}{i}" in env:
                given[name] = env[f"{name}{i}"]
        try:
            run = pipeline.run(given, until={"O"}, rounding=rounding)
        except ValueError:  # a learner's value of a shape that does not combine
            continue
        for name in ("K", "V", "scores", "O"):
            if name in run:
                env.setdefault(f"{name}{i}", run[name])
    d_c = np.shape(ex.given["W_DKV"])[1]  # from the given data: Check my work's exercise has no parts
    env.setdefault("cache_floats", np.full((1, 1), float(latent.cache_floats(d_c))))
    return env


def operations(ex: Exercise) -> budget.Operations:
    """What the worked solution writes: C once; per head K_i (or, at level 3, the absorbed W_QK_i, the queries
    X W_QK_i and the scores straight from C, no K_i and no Q_i) and V_i, then where asked Q_i and attention
    to O_i. Every part's cells counted once, with the values written on the way."""
    size = SIZES[ex.level]
    X, W_DKV = (np.asarray(ex.given[k], dtype=float) for k in ("X", "W_DKV"))
    C = X @ W_DKV
    total = budget.product_operations(X, W_DKV) + budget.parts_written(ex)
    asked = ["V", "O"] if size.attention else ["V"]  # the head's records that are parts: their cells are above
    for i in range(1, heads_of(ex.given) + 1):
        given = head_given(ex.given, i, C)
        if size.absorbed:
            W_Q, W_UK = (np.asarray(given[k], dtype=float) for k in ("W_Q", "W_K"))
            W_QK = latent.absorbed_query(W_Q, W_UK)
            queries = X @ W_QK  # written on the way (the solution's X W_QK step)
            total = total + budget.product_operations(W_Q, W_UK.T) + budget.product_operations(X, W_QK) \
                + budget.written(queries)
            given = {**given, "Q": queries, "K": C}  # the scores read the cached C: Q_i and K_i never formed
            names = ["scores", *asked]
        else:
            names = ["K", *asked]
        total = total + budget.count(given, names, written=())
    return total


# ---------------------------------------------------------------- worked solution


def _renamed(ctx, **symbols: str) -> None:
    ctx.symbols.update(symbols)


def _latent_step(ex: Exercise) -> solutions.Step:
    ctx = solutions.build_context({"X": ex.given["X"], "W_DKV": ex.given["W_DKV"]}, ["latent"], 0)
    return replace(solutions.BUILDERS["latent"](ctx, "latent"), name="C", title=msg("solution.mla.C"),
                   note=msg("solution.mla.C_note"))


def _head_steps(ex: Exercise, i: int) -> list[solutions.Step]:
    size = SIZES[ex.level]
    places = {p.name: p.decimals for p in ex.parts}
    C = ex.part("C").reference
    given = head_given(ex.given, i, C)
    steps = []
    up = solutions.build_context({"X": C, "W_K": given["W_K"], "W_V": given["W_V"]}, ["K", "V"], 0)
    _renamed(up, X="C", W_K=f"W_{{UK}}^{{({i})}}", W_V=f"W_{{UV}}^{{({i})}}", K=f"K^{{({i})}}", V=f"V^{{({i})}}")
    if size.absorbed:
        absorb = solutions.build_context({"Q": given["W_Q"], "K": given["W_K"]}, ["scores"], 0)
        # superscripts only: the scores builder writes row i of a factor as a lowercase vector (w^{Q,1}_{2})
        _renamed(absorb, Q=f"W^{{Q,{i}}}", K=f"W^{{UK,{i}}}", scores=f"W^{{QK,{i}}}")
        steps.append(replace(solutions.BUILDERS["scores"](absorb, "scores"), name=f"W_QK{i}",
                             title=msg("solution.mla.absorb", head=i), note=msg("solution.mla.absorb_note")))
        W_QK = ex.part(f"W_QK{i}").reference
        query = solutions.build_context({"X": ex.given["X"], "W_Q": W_QK}, ["Q"], 0)
        _renamed(query, Q=rf"\tilde{{Q}}^{{({i})}}", W_Q=f"W_{{QK}}^{{({i})}}")
        steps.append(replace(solutions.BUILDERS["Q"](query, "Q"), name=f"Qt{i}",
                             title=msg("solution.mla.absorbed_query", head=i)))
        scores = solutions.build_context({"Q": absorbed_queries(ex, i), "K": C}, ["scores"],
                                         {"scores": places[f"scores{i}"]})
        _renamed(scores, Q=rf"\tilde{{Q}}^{{({i})}}", K="C", scores=f"S^{{({i})}}")
        steps.append(replace(solutions.BUILDERS["scores"](scores, "scores"), name=f"scores{i}",
                             title=msg("solution.mla.scores", head=i), note=msg("solution.mla.scores_note")))
        values = solutions.BUILDERS["V"](up, "V")
        steps.append(replace(values, name=f"V{i}", title=msg("solution.mla.head", head=i, step=values.title)))
        rest = {"scores": ex.part(f"scores{i}").reference, "V": up.val("V"), "d_k": given["d_k"],
                "causal": given["causal"]}
    else:
        for name in ("K", "V"):
            step = solutions.BUILDERS[name](up, name)
            steps.append(replace(step, name=f"{name}{i}", title=msg("solution.mla.head", head=i, step=step.title)))
        queries = solutions.build_context({"X": ex.given["X"], "W_Q": given["W_Q"]}, ["Q"], 0, tag=str(i))
        query = solutions.BUILDERS["Q"](queries, "Q")
        steps.append(replace(query, name=f"Q{i}", title=msg("solution.mla.head", head=i, step=query.title)))
        rest = {"Q": queries.val("Q"), "K": up.val("K"), "V": up.val("V"), "d_k": given["d_k"],
                "causal": given["causal"]}
    if not size.attention:
        return steps
    part = ex.part(f"O{i}")
    ctx = solutions.build_context(rest, ["O"], {"O": part.decimals}, {"O": part.reference}, tag=str(i))
    for name in ctx.shown:
        step = solutions.BUILDERS[name](ctx, name)
        steps.append(replace(step, name=part.name if name == "O" else f"{name}{i}",
                             title=msg("solution.mla.head", head=i, step=step.title)))
    return steps


def absorbed_queries(ex: Exercise, i: int) -> np.ndarray:
    """X W_QK_i: the absorbed queries of head i (n, d_c)."""
    return np.asarray(ex.given["X"], dtype=float) @ ex.part(f"W_QK{i}").reference


def _cache_step(ex: Exercise) -> solutions.Step:
    part, p = ex.part("cache_floats"), ex.params
    value = int(part.reference[0, 0])

    def derive(r: int, c: int) -> solutions.CellDerivation:
        return solutions.CellDerivation(rf"\text{{cache}} = d_c = {value}",
                                        msg("solution.mla.cache_cell", h=p["h"], mha=p["mha_floats"]))

    return solutions.make_step("cache_floats", msg("solution.mla.cache"), part.reference, 0, symbol=r"\text{cache}",
                               formula="d_c", exact_cells=[[str(value)]],
                               note=msg("solution.mla.cache_note", d_c=value, h=p["h"], mha=p["mha_floats"]),
                               derive=derive)


def solve(ex: Exercise) -> list[solutions.Step]:
    """The latent once, then each head from it, then the cache."""
    steps = [_latent_step(ex)]
    for i in range(1, heads_of(ex.given) + 1):
        steps += _head_steps(ex, i)
    return [*steps, _cache_step(ex)]


def aids(ex: Exercise) -> solutions.Aids:
    """e^x for every exponent in any head's softmax, and √d_k (level 1 asks for no softmax: the shapes only)."""
    if not SIZES[ex.level].attention:
        return solutions.Aids(exp_table=(), sqrt_dk=None, shapes=solutions.shapes_of(ex), exp_caption=None)
    heads = [head_given(ex.given, i) for i in range(1, heads_of(ex.given) + 1)]
    return softmax_aids(ex, heads, L.sqrt_dk(int(ex.given["d_k"])))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"C = X W_{DKV},\ K_i = C W_{UK}^{(i)},\ V_i = C W_{UV}^{(i)}")
SHEET = SheetSection("forward", (
    Formula(r"[[C | n | d_c]] = X W_{DKV}, \qquad [[K_i | n | d_k]] = C\, W_{UK}^{(i)}, \qquad "
            r"[[V_i | n | d_v]] = C\, W_{UV}^{(i)}", "formulas.mla.latent"),
    Formula(r"Q_i K_i^{\top} = X W_Q^{(i)} \big(C W_{UK}^{(i)}\big)^{\top} = X \underbrace{W_Q^{(i)} "
            r"W_{UK}^{(i)\top}}_{W_{QK}^{(i)}} C^{\top}", "formulas.mla.absorbed"),
    Formula(r"\text{cache per token and layer} = d_c \;\text{ against }\; h\,(d_k + d_v)", "formulas.mla.cache"),
))
