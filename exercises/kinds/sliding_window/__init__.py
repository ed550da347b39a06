"""Sliding-window attention with attention sinks (StreamingLLM): each query sees the last w keys up to
itself and the s sink tokens at the front, nothing else.

    M_ij = 0 if j ≤ i and (i − j < w or j ≤ s), else −∞      (1-based: the sinks are keys 1 … s)
    Z̃ = Z + M,  A = softmax(Z̃),  O = A V                       (levels 2 and 3; O at level 3)
    cache_floats = [2 (s + w) d_head, 2 T d_head]              one layer and head: the window against full

M, Z̃, A and O are the step records' (the record M makes the window's mask, with its mistakes: the window one
key too wide or too narrow, the sinks forgotten, a window that looks ahead); the cache sizes are this kind's
own value, as are their mistakes: without the sinks, of K or V alone, or of full attention.

Axes: B candidates, n tokens, d_v.
"""

from __future__ import annotations

import numpy as np

from attention_core.windows import full_cache_floats, window_cache_floats

from ... import solutions
from ...core import budget, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, matrices
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.hand import own_diagnosis

ID = "sliding_window"
ORDER = 47  # after padding_mask (45): another mask, before the softmax (50)
VERSION = 2
LEVELS = (1, 2, 3)
GUARDS = ("window_too_wide", "window_too_narrow", "window_sinks_forgotten", "window_looks_ahead",
          "softmax_columns", "no_exp", "softmax_no_normalise", "mask_zero_instead_of_inf", "weights_transposed")
MISTAKES = ("window_cache_no_sinks", "window_cache_one_of_k_v", "window_cache_full")
RENAMED = {"Z": "scaled"}  # given values of version 1 under their names now (DESIGN §3.4)
# level: (n tokens, (window, sinks) pairs to draw from, parts, the values of V or None)
SIZES = {1: (5, ((2, 1), (3, 1)), ["M", "cache_floats"], None),
         2: (4, ((2, 1),), ["M", "A", "cache_floats"], None),
         3: (5, ((2, 1), (2, 2), (3, 1)), ["M", "A", "O", "cache_floats"], (-1, 0, 1, 2))}
EXP_GRID = {2: (ExpSeries(1, 2, -4, 4),), 3: (ExpSeries(1, 2, -4, 6),)}
TOKENS = (1024, 4096, 8192)  # the text length T of the cache part
D_HEAD = (16, 64, 128)
BATCH = 32
STATED = ("tokens", "d_head")  # the text length T and the head width whose caches are counted


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of scaled scores (and values) sharing one window, sink count and model."""
    n, shapes, names, v_values = SIZES[level]
    window, sinks = shapes[int(rng.integers(len(shapes)))]
    given = {"scaled": matrices(rng, BATCH, (n, n), spec(level).values), "window": window, "sinks": sinks}
    stacked = ("scaled",)
    if v_values is not None:
        given["V"] = matrices(rng, BATCH, (n, 1), v_values)  # (B, n, 1)
        stacked = ("scaled", "V")
    params = {"n": n, "w": window, "s": sinks, "tokens": int(choice(rng, TOKENS)), "d_head": int(choice(rng, D_HEAD))}
    sizes = caches(window, sinks, params)
    return Batch(given, stacked, list(names), params=params, keep=_teaches, decimals=spec(level).decimals,
                 derive=_stacked(sizes.pop(None)), sources={"cache_floats": ()},
                 own={mid: _stacked(floats) for mid, floats in sizes.items()})


def _stacked(floats: tuple[int, int]):
    """env -> {"cache_floats": these sizes for every candidate}: (B, 1, 2)."""
    return lambda env: {"cache_floats": np.broadcast_to(np.array([floats], dtype=float), (len(env["scaled"]), 1, 2))}


def _teaches(env) -> np.ndarray:
    """Per candidate: no query that sees two keys or more sees them all score the same, and an output
    (where asked) that is not 0 everywhere."""
    masked = env["masked"]  # (B, n, n)
    seen = np.isfinite(masked)
    spread = np.where(seen, masked, -np.inf).max(axis=2) - np.where(seen, masked, np.inf).min(axis=2)
    ok = ((seen.sum(axis=2) < 2) | (spread > 0)).all(axis=1)
    if "O" in env:
        ok &= (np.abs(env["O"]) > 1e-9).any(axis=(1, 2)) & (np.ptp(env["V"], axis=1) > 0).all(axis=1)
    return ok


def caches(window: int, sinks: int, params: dict) -> dict[str | None, tuple[int, int]]:
    """The floats cached by the window and by full attention (key None), and what each of the kind's mistakes
    gives; none when no model is stated (STATED)."""
    if not all(name in params for name in STATED):
        return {}
    d, T = params["d_head"], params["tokens"]
    full = full_cache_floats(T, d)
    return {None: (window_cache_floats(window, sinks, d), full), "window_cache_no_sinks": (2 * window * d, full),
            "window_cache_one_of_k_v": ((window + sinks) * d, T * d), "window_cache_full": (full, full)}


def stated_params(given: dict, stated: dict) -> dict:
    """The prompt's numbers for a learner's own window (check my work): n, w, s from the given data, the
    model they state (STATED)."""
    return {"n": int(np.shape(given["scaled"])[0]), "w": int(given["window"]), "s": int(given["sinks"]),
            **{name: int(stated[name]) for name in STATED if name in stated}}


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    keys = ["kind.sliding_window.prompt"]
    if "A" in ex.part_names:
        keys.append("kind.sliding_window.prompt_softmax")
    if "O" in ex.part_names:
        keys.append("kind.sliding_window.prompt_output")
    return (*keys, "kind.sliding_window.prompt_cache")


# ---------------------------------------------------------------- diagnosis, carrying forward, hand work


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """The cache sizes' own mistakes (the records name the others)."""
    if part.name != "cache_floats":
        return None
    sizes = caches(int(ex.given["window"]), int(ex.given["sinks"]), ex.params)
    return own_diagnosis(part, value, {mid: np.array([floats], dtype=float) for mid, floats in sizes.items() if mid})


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """M, Z̃, A and O from the records unless the learner gave them (each computed value rounded half-up to
    `rounding` places; None: exact), the cache sizes from the model where it is stated."""
    env = {**pipeline.run({**ex.given, **values}, rounding=rounding), **values}
    cache = caches(int(ex.given["window"]), int(ex.given["sinks"]), ex.params).get(None)
    if cache is not None:
        env.setdefault("cache_floats", np.array([cache], dtype=float))
    return env


def operations(ex: Exercise) -> budget.Operations:
    """The records' work (the mask written cell by cell, the softmax of the visible scores, A V), the two
    cache sizes (two products each), every cell written."""
    return budget.operations(ex, None) + budget.Operations(multiply_adds=4)


# ---------------------------------------------------------------- worked solution

M_FORMULA = (r"\begin{cases} 0 & j \le i \ \text{and}\ (i - j < w \ \text{or}\ j \le s) \\ -\infty & "
             r"\text{otherwise} \end{cases}")


def _m_step(ex: Exercise) -> solutions.Step:
    M = pipeline.reference_env(ex)["M"]  # (n, n)
    w, s = int(ex.given["window"]), int(ex.given["sinks"])

    def derive(i: int, j: int) -> solutions.CellDerivation:
        here, a, b = L.cell("M", i, j), i + 1, j + 1
        if j > i:
            return solutions.CellDerivation(rf"{here} = -\infty \quad (j = {b} > i = {a})",
                                            msg("solution.sliding_window.ahead", column=b, query=a))
        if i - j < w:
            return solutions.CellDerivation(rf"{here} = 0 \quad (i - j = {a - b} < w = {w})",
                                            msg("solution.sliding_window.in_window", column=b))
        if j < s:
            return solutions.CellDerivation(rf"{here} = 0 \quad (j = {b} \le s = {s})",
                                            msg("solution.sliding_window.sink", column=b))
        return solutions.CellDerivation(rf"{here} = -\infty \quad (i - j = {a - b} \ge w = {w},\ j = {b} > s = {s})",
                                        msg("solution.sliding_window.dropped", column=b))

    cells = [[r"-\infty" if np.isneginf(x) else "0" for x in row] for row in M]
    return solutions.make_step("M", msg("solution.sliding_window.M", w=w, s=s), M, 0, symbol="M",
                               lhs=L.entry("M", "ij"), formula=M_FORMULA, exact_cells=cells,
                               note=msg("solution.sliding_window.M_note"), derive=derive)


def _cache_step(ex: Exercise) -> solutions.Step:
    part = ex.part("cache_floats")
    p, w, s = ex.params, int(ex.given["window"]), int(ex.given["sinks"])
    counts = (s + w, p["tokens"])  # the tokens kept: the sinks and the window, or the whole text
    symbolic = (r"2 (s + w) d_{\text{head}}", r"2 T d_{\text{head}}")
    sums = (rf"2 \cdot ({s} + {w}) \cdot {p['d_head']}", None)

    def derive(_: int, j: int) -> solutions.CellDerivation:
        factors = ("2", str(counts[j]), str(p["d_head"]))
        value = float(part.reference[0, j])
        middle = [symbolic[j]] + ([sums[j]] if sums[j] else [])
        latex, sub = solutions.worked_chain(L.cell(r"\text{floats}", 0, j), str(int(value)), value, 0,
                                            r" \cdot ".join(factors), "sum", [[solutions.number(f) for f in factors]],
                                            *middle)
        return solutions.CellDerivation(latex, msg(f"solution.sliding_window.cache.{'window' if j == 0 else 'full'}"),
                                        (sub,))

    return solutions.make_step("cache_floats", msg("solution.sliding_window.cache"), part.reference, 0,
                               symbol=r"\text{floats}", formula=rf"\begin{{bmatrix}} {symbolic[0]} & {symbolic[1]} "
                                                                 r"\end{bmatrix}",
                               exact_cells=[[str(int(x)) for x in part.reference[0]]],
                               note=msg("solution.sliding_window.cache.note", **p), derive=derive)


def solve(ex: Exercise) -> list[solutions.Step]:
    """The mask cell by cell, the registry's softmax of Z̃ = Z + M and A V, the two cache sizes."""
    steps = [_m_step(ex)]
    names = [n for n in ("A", "O") if n in ex.part_names]
    if names:
        given = {"masked": pipeline.reference_env(ex)["masked"], "causal": False}
        if "V" in ex.given:
            given["V"] = np.asarray(ex.given["V"], dtype=float)
        places = {p.name: p.decimals for p in ex.parts}
        steps += solutions.pipeline_steps(given, names, places, {n: ex.part(n).reference for n in names})
    return [*steps, _cache_step(ex)]


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"M_{ij} = 0 \iff i - j < w \ \text{or}\ j \le s")
SHEET = SheetSection("forward", (
    Formula(r"[[M | n | n]], \qquad M_{ij} = " + M_FORMULA, "formulas.sliding_window.rule"),
    Formula(r"\text{floats} = 2\,(s + w)\,d_{\text{head}} \quad \text{against} \quad 2\,T\,d_{\text{head}}",
            "formulas.sliding_window.cache"),
), position=46)
