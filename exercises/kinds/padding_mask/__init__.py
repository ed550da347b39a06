"""Padding masks: one row of a batch has padding tokens, flagged by pad (1 = padding).

    M_ij = −∞  when key j is padding (p_j = 1) or, with the causal mask, when j > i;  0 otherwise
    Z̃ = Z + M,  A = softmax(Z̃) row by row

Padding hides a KEY (a column of M) from every query; the padded positions' own rows still attend to
the real keys before them. The convention for a query that sees no key at all (left padding under a
causal mask: the first query's only key is padding): its row of Z̃ is all −∞, and its row of A is all
0 (it attends to nothing, so its output is 0; the softmax of −∞ alone is undefined, 0/0). The prompt
states it, the grader grades it, and the "−1e9 instead of −∞" reading (uniform weights) is a named
mistake. The other mistakes: padding on the query axis, padding left out, the causal half left out,
the mask applied after the softmax (weights zeroed, not renormalised).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attention_core.ops import padding_mask

from ... import solutions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import matrices
from ...core.sampler import Batch
from ...i18n import msg, plural
from ...rendering import latex as L
from ...solutions.aids import ExpSeries

ID = "padding_mask"
ORDER = 45
VERSION = 3
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {2: (ExpSeries(1, 2, -4, 4),), 3: (ExpSeries(1, 2, -4, 6),)}
# every catalogued mistake that can apply to this kind's parts: the sampler keeps them apart
GUARDS = ("no_mask", "no_exp", "mask_zero_instead_of_inf", "softmax_no_normalise", "padding_on_queries",
          "padding_ignored", "padding_after_softmax", "padding_empty_row_uniform")
# not guarded: softmax down the columns gives 0/0 in a padded key's column (no one can write it)

# level: (tokens n, padding tokens to draw from, sides (right: the last tokens pad, left: the first), parts)
SIZES = {1: (3, (1,), ("right",), ["M", "masked"]),
         2: (3, (1,), ("right", "left"), ["M", "masked", "A"]),
         3: (4, (1, 2), ("right", "left"), ["M", "masked", "A"])}
BATCH = 32


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of candidates sharing one padding and causal flag (one of the level's patterns), each with
    its own scores Z."""
    n, _, _, names = SIZES[level]
    patterns = _patterns(level)
    pad, causal = patterns[int(rng.integers(len(patterns)))]
    given = {"scaled": matrices(rng, BATCH, (n, n), spec(level).values),  # (B, n, n)
             "pad": np.broadcast_to(pad, (BATCH, 1, n)).copy(),  # (B, 1, n)
             "causal": causal}
    params = {"n": n, "pad": ", ".join(str(int(p)) for p in pad[0]),
              "padded": ", ".join(str(j + 1) for j in np.flatnonzero(pad[0]))}
    return Batch(given, ("scaled", "pad"), list(names), params=params, keep=_teaches,
                 decimals=spec(level).decimals)


def _patterns(level: int) -> list[tuple[np.ndarray, bool]]:
    """The level's paddings (pad (1, n)) × causal flags, in draw order."""
    n, pads, sides, _ = SIZES[level]
    found = []
    for count in pads:
        for side in sides:
            pad = np.zeros((1, n))  # (1, n): one flag per token, over the keys
            if side == "right":
                pad[0, n - count:] = 1
            else:
                pad[0, :count] = 1
            found += [(pad, causal) for causal in ((False, True) if level == 1 else (True,))]
    return found


def _teaches(env) -> np.ndarray:
    """Per candidate: no query that sees two keys or more sees them all score the same (its weights
    would be uniform whatever is masked)."""
    masked = env["masked"]  # (B, n, n)
    seen = np.isfinite(masked)
    spread = np.where(seen, masked, -np.inf).max(axis=2) - np.where(seen, masked, np.inf).min(axis=2)  # (B, n)
    return ((seen.sum(axis=2) < 2) | (spread > 0)).all(axis=1)


def flags(ex: Exercise) -> np.ndarray:
    return np.asarray(ex.given["pad"], dtype=bool).ravel()  # (n,)


def empty_rows(ex: Exercise) -> np.ndarray:
    """The queries that see no key at all (every entry of their row of M is −∞)."""
    M = padding_mask(ex.given["pad"], bool(ex.given["causal"]))
    return np.all(np.isneginf(M), axis=1)  # (n,)


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    keys = ["kind.padding_mask.prompt", "kind.padding_mask.prompt_causal" if ex.given["causal"]
            else "kind.padding_mask.prompt_open"]
    if "A" in ex.part_names:
        keys.append("kind.padding_mask.prompt_softmax")
    return tuple(keys)


# ---------------------------------------------------------------- worked solution

M_FORMULA = (r"\begin{cases} -\infty & p_j = 1 \ \text{or}\ j > i \\ 0 & \text{otherwise} \end{cases}")
M_FORMULA_OPEN = r"\begin{cases} -\infty & p_j = 1 \\ 0 & \text{otherwise} \end{cases}"


def _m_step(ex: Exercise) -> solutions.Step:
    pad, causal = flags(ex), bool(ex.given["causal"])
    M = padding_mask(pad, causal)  # (n, n)
    cells = _m_cells(M)

    def derive(i: int, j: int) -> solutions.CellDerivation:
        here = L.cell("M", i, j)
        if pad[j]:
            return solutions.CellDerivation(rf"{here} = -\infty \quad (p_{{{j + 1}}} = 1)",
                                            msg("solution.padding_mask.padded_key", column=j + 1))
        if causal and j > i:
            return solutions.CellDerivation(rf"{here} = -\infty \quad (j = {j + 1} > i = {i + 1})",
                                            msg("solution.cell.masked", column=j + 1, query=i + 1))
        why = rf" \quad (p_{{{j + 1}}} = 0" + (rf",\ j = {j + 1} \le i = {i + 1})" if causal else ")")
        return solutions.CellDerivation(f"{here} = 0{why}", msg("solution.padding_mask.visible", column=j + 1))

    return solutions.make_step("M", msg("solution.padding_mask.M"), M, 0, symbol="M", lhs=L.entry("M", "ij"),
                               formula=M_FORMULA if causal else M_FORMULA_OPEN, exact_cells=cells,
                               note=msg("solution.padding_mask.M_note"), derive=derive)


def _masked_step(ex: Exercise) -> solutions.Step:
    Z = np.asarray(ex.given["scaled"], dtype=float)  # (n, n)
    M = padding_mask(flags(ex), bool(ex.given["causal"]))
    masked = Z + M
    z_text = [[L.number(x) for x in row] for row in Z]
    cells = [[r"-\infty" if np.isneginf(x) else L.number(x) for x in row] for row in masked]
    zs, ms = "Z", r"\tilde{Z}"

    places = ex.part("masked").decimals

    def derive(i: int, j: int) -> solutions.CellDerivation:
        here = L.cell(ms, i, j)
        symbolic = f"{L.cell(zs, i, j)} + {L.cell('M', i, j)}"
        if np.isneginf(M[i, j]):
            return solutions.CellDerivation(L.chain(here, symbolic, r"-\infty"), msg("solution.padding_mask.hidden"))
        result = L.decimal(masked[i, j], places)
        sub = solutions.Substitution("sum", ((solutions.number(z_text[i][j], Z[i, j]),), (solutions.number("0", 0),)),
                                     result, places)
        return solutions.CellDerivation(L.chain(here, symbolic, f"{z_text[i][j]} + 0", result), None, (sub,))

    return solutions.make_step("masked", msg("solution.padding_mask.masked"), masked, ex.part("masked").decimals,
                               symbol=ms, formula="Z + M", exact_cells=cells, derive=derive,
                               work=[("", "=", f"{L.matrix_exact(Z)} + {L.bmatrix(_m_cells(M))}")])


def _m_cells(M: np.ndarray) -> list[list[str]]:
    return [[r"-\infty" if np.isneginf(x) else "0" for x in row] for row in M]


def _softmax_step(ex: Exercise) -> solutions.Step:
    """The registry's softmax of Z̃, with the convention for a query that sees no key."""
    part = ex.part("A")
    masked = np.asarray(ex.given["scaled"], dtype=float) + padding_mask(flags(ex), bool(ex.given["causal"]))
    ctx = solutions.build_context({"masked": masked, "causal": False}, ["A"], places={"A": part.decimals},
                                  values={"A": part.reference})
    step = solutions.BUILDERS["A"](ctx, "A")
    empty = empty_rows(ex)
    if not empty.any():
        return step
    inner = step.derive

    def derive(i: int, j: int) -> solutions.CellDerivation:
        if empty[i]:
            return solutions.CellDerivation(rf"{L.cell('A', i, j)} = 0",
                                            msg("solution.padding_mask.empty_row", query=i + 1))
        return inner(i, j)

    cells = tuple(tuple("0" if empty[i] else c for c in row) for i, row in enumerate(step.exact_cells))
    complete = all(c is not None for row in cells for c in row)
    return replace(step, derive=derive, exact_cells=cells, exact=cells if complete else None, _memo={},
                   note=plural("solution.padding_mask.empty_note", int(np.count_nonzero(empty)),
                               queries=", ".join(str(i + 1) for i in np.flatnonzero(empty))))


def solve(ex: Exercise) -> list[solutions.Step]:
    steps = [_m_step(ex), _masked_step(ex)]
    if "A" in ex.part_names:
        steps.append(_softmax_step(ex))
    return steps


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("forward", r"\tilde{Z} = Z + M_{\text{pad}}")
SHEET = SheetSection("forward", (
    Formula(r"[[M | n | n]], \qquad M_{ij} = " + M_FORMULA, "formulas.padding_mask.rule"),
    Formula(r"\tilde{Z} = Z + M, \qquad A = \operatorname{softmax}(\tilde{Z}), \qquad "
            r"A_{i\cdot} = 0 \ \text{when every}\ M_{ij} = -\infty", "formulas.padding_mask.empty"),
), position=41)
