"""The pre-norm attention block: X̂ = Norm(X) row by row, attention on X̂, then the residual Y = X + O.

    LayerNorm: X̂_ij = γ_j (X_ij − μ_i) / σ_i + β_j     RMSNorm (level 3, half the time): X̂_ij = γ_j X_ij / rms_i
    Q = X̂ W_Q,  K = X̂ W_K,  V = X̂ W_V,  A = softmax(mask(Q Kᵀ / √d_k)),  O = A V,  Y = X + O

Every step is a record (X_norm and Y beside attention's own), so grading, carry-forward, the budget and
the diagnosis are the registry's. Each row of X is drawn as μ + σ z with z of mean 0 and variance 1 (±1
entries; for RMSNorm also one ±2) and whole μ, σ: the statistics and the normalised rows are exact.
W_V is square, so that O has X's width and the residual adds up; at level 1 it is the identity (V = X̂, read
off), and level 1 stops at O (it normalises and attends; the residual Y from level 2), within its minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations, product

import numpy as np

from ... import solutions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import matrices
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids

ID = "attention_block"
ORDER = 75  # after the whole forward pass (70): the same attention, wrapped in its norm and residual
VERSION = 3
LEVELS = (1, 2, 3)
EXP_GRID = {1: (ExpSeries(1, 1, -4, 4),), 2: (ExpSeries(1, 1, -4, 4),), 3: (ExpSeries(1, 4, -8, 8, root=2),)}
GUARDS = ("norm_over_columns", "norm_variance_unbiased", "residual_forgotten", "norm_after_residual",
          "transposed_scores", "no_scaling", "scaled_by_sqrt_d_model", "scaled_by_dk", "mask_wrong_triangle",
          "no_mask", "mask_after_softmax",
          "softmax_columns", "no_exp", "weights_transposed", "mask_zero_instead_of_inf", "softmax_no_normalise",
          "scaled_times_sqrt_dk")
# not guarded: mask_diagonal leaves the first token no key at all, an A no one can write


@dataclass(frozen=True)
class Size:
    n: int  # tokens
    d: int  # d_model (= d_v: the residual adds O to X)
    d_k: int
    parts: tuple[str, ...]
    causal: tuple[bool, ...]  # drawn from these
    rms: tuple[bool, ...]  # RMSNorm drawn from these (False: LayerNorm)
    gammas: tuple[int, ...]  # entries of γ
    means: tuple[int, ...]  # μ of a LayerNorm row
    spreads: tuple[int, ...]  # σ of a row (its rms for RMSNorm)
    value_identity: bool = False  # W_V = I: V is X̂ itself, read off


EVERY_STEP = ("X_norm", "Q", "K", "V", "A", "O", "Y")
# level 1 stops at O: the residual Y too would not fit its 5 minutes
SIZES = {1: Size(n=2, d=2, d_k=1, parts=("X_norm", "A", "O"), causal=(True,), rms=(False,), gammas=(1,),
                 means=(-1, 0, 1, 2), spreads=(1,), value_identity=True),
         2: Size(n=2, d=4, d_k=1, parts=EVERY_STEP, causal=(False, True), rms=(False,), gammas=(1, 2),
                 means=(-1, 0, 1, 2), spreads=(1, 2)),
         3: Size(n=3, d=4, d_k=2, parts=EVERY_STEP, causal=(False, True), rms=(False, True), gammas=(1, 2),
                 means=(-1, 0, 1), spreads=(1, 2))}
BETA = (-1, 0, 1)
WEIGHT_VALUES = (-1, 0, 1)
MAX_SCORE = 4
BATCH = {1: 256, 2: 64, 3: 64}  # level 1's two tokens of two features are kept least often (norm_over_columns)


def unit_rows(d: int, rms: bool) -> np.ndarray:
    """(k, d): every row of whole numbers with mean square 1, and (LayerNorm) mean 0: ±1 entries, half of
    each sign; for RMSNorm any signs and also a single ±2."""
    rows = [r for r in product((-1, 1), repeat=d) if rms or sum(r) == 0]
    if rms:
        rows += [tuple(s * 2 if k == j else 0 for k in range(d)) for j in range(d) for s in (-1, 1)] if d == 4 else []
    return np.array(rows, dtype=float)


def draw(rng: np.random.Generator, level: int) -> Batch:
    """X row by row as μ + σ z (z a unit row), γ, β, ternary W_Q, W_K (d × d_k) and W_V (d × d)."""
    size = SIZES[level]
    n, d, d_k, B = size.n, size.d, size.d_k, BATCH[level]
    rms = bool(rng.choice(size.rms))
    causal = bool(rng.choice(size.causal))
    z = unit_rows(d, rms)[rng.integers(len(unit_rows(d, rms)), size=(B, n))]  # (B, n, d)
    sigma = np.asarray(size.spreads, dtype=float)[rng.integers(len(size.spreads), size=(B, n, 1))]
    mu = 0.0 if rms else np.asarray(size.means, dtype=float)[rng.integers(len(size.means), size=(B, n, 1))]
    given = {"X": mu + sigma * z, "gamma": matrices(rng, B, (1, d), size.gammas)}  # (B, n, d), (B, 1, d)
    if not rms:
        given["beta"] = matrices(rng, B, (1, d), BETA)  # (B, 1, d)
    given.update({w: matrices(rng, B, (d, d_k), WEIGHT_VALUES) for w in ("W_Q", "W_K")})
    given["W_V"] = np.repeat(np.eye(d)[None], B, axis=0) if size.value_identity \
        else matrices(rng, B, (d, d), WEIGHT_VALUES)  # (B, d, d)
    stacked = tuple(given)
    given.update(d_k=d_k, causal=causal)
    names = "rms" if rms else "layer"
    return Batch(given, stacked, list(size.parts), params={"n": n, "d": d, "d_k": d_k, "causal": causal, "norm": names},
                 keep=_hand_friendly, decimals=spec(level).decimals)


def _hand_friendly(env) -> np.ndarray:
    """Per candidate: the normalised rows differ, no weight column is zero, every value row is nonzero,
    the scores are small and on the grid of halves, and some query weighs two keys differently."""
    Xn, S = env["X_norm"], env["scores"]  # (B, n, d), (B, n, n)
    ok = np.ones(len(S), dtype=bool)
    for a, b in combinations(range(Xn.shape[1]), 2):
        ok &= (Xn[:, a] != Xn[:, b]).any(axis=1)
    for w in ("W_Q", "W_K", "W_V"):
        ok &= (env[w] != 0).any(axis=1).all(axis=1)
    ok &= (env["V"] != 0).any(axis=2).all(axis=1)
    ok &= (np.abs(2 * S - np.round(2 * S)) < 1e-9).all(axis=(1, 2)) & (np.abs(S).max(axis=(1, 2)) <= MAX_SCORE)
    seen = np.tril(np.ones(S.shape[1:], dtype=bool)) if env["causal"] else np.ones(S.shape[1:], dtype=bool)
    spread = np.where(seen, S, -np.inf).max(axis=2) - np.where(seen, S, np.inf).min(axis=2)  # (B, n)
    return ok & (spread > 0).any(axis=1)


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    norm = "kind.attention_block.rms" if "beta" not in ex.given else "kind.attention_block.layer"
    mask = "kind.attention_block.causal" if ex.given["causal"] else "kind.attention_block.full"
    W_V = np.asarray(ex.given["W_V"], dtype=float)
    values = ("kind.attention_block.value_identity",) if np.array_equal(W_V, np.eye(len(W_V))) else ()
    block = "kind.attention_block.prompt" if "Y" in ex.part_names else "kind.attention_block.prompt_no_residual"
    return (block, norm, mask, *values)


# ---------------------------------------------------------------- worked solution


def _attention_given(ex: Exercise) -> dict:
    """Attention as the block runs it: on the normalised rows (the reference X̂) instead of X."""
    return {"X": ex.part("X_norm").reference, **{w: ex.given[w] for w in ("W_Q", "W_K", "W_V")},
            "d_k": ex.given["d_k"], "causal": ex.given["causal"]}


def _row_stats(ex: Exercise, i: int) -> tuple[float, float]:
    """(μ_i, σ_i) of row i, or (0, rms_i) for RMSNorm."""
    x = np.asarray(ex.given["X"], dtype=float)[i]
    mu = float(x.mean()) if "beta" in ex.given else 0.0
    return mu, float(np.sqrt(((x - mu) ** 2).mean()))


def _norm_step(ex: Exercise) -> solutions.Step:
    """Each row's μ and σ (or rms), then every cell γ_j (x_ij − μ_i) / σ_i + β_j."""
    part = ex.part("X_norm")
    X, gamma = np.asarray(ex.given["X"], dtype=float), np.asarray(ex.given["gamma"], dtype=float)[0]
    layer = "beta" in ex.given
    beta = np.asarray(ex.given["beta"], dtype=float)[0] if layer else np.zeros_like(gamma)
    d = X.shape[1]
    num = L.number
    work = []
    for i, row in enumerate(X):
        mu, sigma = _row_stats(ex, i)
        entries = " + ".join(num(x) for x in row)
        if layer:
            devs = " + ".join(rf"({num(x - mu)})^2" for x in row)
            work.append((rf"\mu_{{{i + 1}}}", "=", rf"\frac{{{entries}}}{{{d}}} = {num(mu)}"))
            work.append((rf"\sigma_{{{i + 1}}}", "=", rf"\sqrt{{\frac{{{devs}}}{{{d}}}}} = {num(sigma)}"))
        else:
            squares = " + ".join(rf"({num(x)})^2" for x in row)
            work.append((rf"\mathrm{{rms}}_{{{i + 1}}}", "=", rf"\sqrt{{\frac{{{squares}}}{{{d}}}}} = {num(sigma)}"))

    def derive(i: int, j: int) -> solutions.CellDerivation:
        mu, sigma = _row_stats(ex, i)
        x, g, value = (solutions.number(num(v)) for v in (X[i, j], gamma[j], part.reference[i, j]))
        m, s = solutions.number(num(mu)), solutions.number(num(sigma))
        if layer:  # (x − μ) / σ first, then γ times it plus β: two recorded lines
            u, b = solutions.number(num((X[i, j] - mu) / sigma)), solutions.number(num(beta[j]))
            symbolic = (rf"\gamma_{{{j + 1}}} \frac{{X_{{{i + 1}{j + 1}}} - \mu_{{{i + 1}}}}}{{\sigma_{{{i + 1}}}}} "
                        rf"+ \beta_{{{j + 1}}}")
            latex = L.chain(L.cell(r"\hat{X}", i, j), symbolic,
                            rf"{g.text} \cdot \frac{{{x.text} - {L.paren(m.text)}}}{{{s.text}}} + {L.paren(b.text)}",
                            rf"{g.text} \cdot {L.paren(u.text)} + {L.paren(b.text)}", value.text)
            subs = (solutions.Substitution("difference_quotient", ((x, m), (s,)), u.text, None),
                    solutions.Substitution("sum", ((g, u), (b,)), value.text, None))
        else:
            symbolic = rf"\gamma_{{{j + 1}}} \frac{{X_{{{i + 1}{j + 1}}}}}{{\mathrm{{rms}}_{{{i + 1}}}}}"
            numbers = rf"\frac{{{g.text} \cdot {L.paren(x.text)}}}{{{s.text}}}"
            latex = L.chain(L.cell(r"\hat{X}", i, j), symbolic, numbers, value.text)
            subs = (solutions.Substitution("quotient", ((g, x), (s,)), value.text, None),)
        return solutions.CellDerivation(latex, None, subs)

    formula = (r"\gamma_j \frac{X_{ij} - \mu_i}{\sigma_i} + \beta_j" if layer
               else r"\gamma_j \frac{X_{ij}}{\mathrm{rms}_i}")
    exact = [[num(x) for x in row] for row in part.reference]
    return solutions.make_step("X_norm", msg(f"solution.attention_block.{'layer' if layer else 'rms'}"),
                               part.reference, part.decimals, symbol=r"\hat{X}", lhs=r"\hat{X}_{ij}",
                               formula=formula, work=work, exact_cells=exact,
                               note=msg("solution.attention_block.norm_note"), derive=derive)


def _residual_step(ex: Exercise) -> solutions.Step:
    """Y = X + O cell by cell, from O as the step before shows it."""
    part, O = ex.part("Y"), ex.part("O")
    X = np.asarray(ex.given["X"], dtype=float)

    def derive(i: int, j: int) -> solutions.CellDerivation:
        x = solutions.number(L.number(X[i, j]))
        o = solutions.number(L.decimal(O.reference[i, j], O.decimals), O.reference[i, j],
                             not L.is_exact_decimal(L.decimal(O.reference[i, j], O.decimals), O.reference[i, j]))
        latex, sub = solutions.worked_chain(L.cell("Y", i, j), None, part.reference[i, j], part.decimals,
                                            f"{x.text} + {L.paren(o.text)}", "sum", [[x], [o]],
                                            f"X_{{{i + 1}{j + 1}}} + O_{{{i + 1}{j + 1}}}")
        return solutions.CellDerivation(latex, None, (sub,))

    return solutions.make_step("Y", msg("solution.attention_block.residual"), part.reference, part.decimals,
                               symbol="Y", formula="X + O", note=msg("solution.attention_block.residual_note"),
                               derive=derive)


def solve(ex: Exercise) -> list[solutions.Step]:
    """The norm, attention from the normalised rows (the registry's walk, X̂ written where X was), the residual."""
    places = {p.name: p.decimals for p in ex.parts}
    refs = {p.name: p.reference for p in ex.parts if p.name not in ("X_norm", "Y")}
    ctx = solutions.build_context(_attention_given(ex), ["Q", "K", "V", "A", "O"], places, refs)
    ctx.symbols["X"] = r"\hat{X}"  # the projections read the normalised rows
    steps = [solutions.BUILDERS[name](ctx, name) for name in ctx.shown]
    steps = [replace(s, note=msg("solution.attention_block.projection_note")) if s.name == "Q" else s for s in steps]
    return [_norm_step(ex), *steps, *([_residual_step(ex)] if "Y" in ex.part_names else [])]  # level 1 stops at O


def aids(ex: Exercise) -> solutions.Aids:
    """The eˣ table of the softmax on the normalised rows, and √d_k."""
    return softmax_aids(ex, [_attention_given(ex)], L.sqrt_dk(int(ex.given["d_k"])))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"Y = X + \operatorname{Attention}(\operatorname{Norm}(X))")
SHEET = SheetSection("forward", (
    Formula(r"[[\hat{X} | n | d]]: \quad \hat{X}_{ij} = \gamma_j \frac{X_{ij} - \mu_i}{\sigma_i} + \beta_j, \qquad "
            r"\mu_i = \frac{1}{d} \sum_{k} X_{ik}, \quad \sigma_i^2 = \frac{1}{d} \sum_{k} (X_{ik} - \mu_i)^2",
            "formulas.attention_block.layer"),
    Formula(r"\hat{X}_{ij} = \gamma_j \frac{X_{ij}}{\mathrm{rms}_i}, \qquad "
            r"\mathrm{rms}_i^2 = \frac{1}{d} \sum_{k} X_{ik}^2", "formulas.attention_block.rms"),
    Formula(r"[[Y | n | d]] = X + \operatorname{Attention}(\hat{X}) \quad \text{(pre-norm)}, \qquad "
            r"Y = \operatorname{Norm}(X + \operatorname{Attention}(X)) \quad \text{(post-norm)}",
            "formulas.attention_block.residual"),
))
