"""Rotary position embedding (RoPE) on 2-D pairs, with angles from a small table.

Row p of Q (and of K) is split into pairs of columns (1, 2), (3, 4), …; pair i is rotated by the
angle φ_pi = pos_p θ_i:

    q'_{2i−1} = q_{2i−1} cos φ − q_{2i} sin φ        q'_{2i} = q_{2i−1} sin φ + q_{2i} cos φ
    scores = Q_rot K_rotᵀ,   S_pr = q_p R(φ_p) R(φ_r)ᵀ k_rᵀ = q_p R(φ_p − φ_r) k_rᵀ: only the position difference

(row vectors: x R(φ) turns x by φ, R(φ)ᵀ = R(−φ), as the Home card's q' = q R(pos θ))

Angles are multiples of 90° (level 1 and 2) or 30° (level 3 and some of level 2), so cos and sin are
0, ±1/2, ±√3/2, ±1: the prompt lists them. The kind's own mistakes (rope_* in its locales: one angle
for every position, positions counted off by one, the halves paired (i, i + m) instead of neighbours,
the sign of sin, the rotation applied to q only or not at all, and K_rot Q_rotᵀ) are kept apart with
the step records' score mistakes on the given, unrotated Q and K (GUARDS). Off by one and the half
split leave the scores as they are or nearly: Q_rot and K_rot, asked at every level, tell them apart.
Rotating V, which these parts cannot show, is asked in `concepts` at level 3 (its rope_rotates question).

Axes: B candidates, n tokens, m pairs (a row is 2m wide).
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import sympy

from attention_core.positions import frequencies, rotation_angles

from ... import solutions
from ...core import budget
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, matrices, no_zero_lines, round_half_up
from ...core.reach import Reach
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from .._shared.hand import carried_grid, exact_number, own_diagnosis, product_step

ID = "rope"
ORDER = 84  # after multi_head: where a token is, once attention is whole
VERSION = 4
LEVELS = (1, 2, 3)
# the step records' score mistakes, made on the given (unrotated) Q and K
GUARDS = ("transposed_scores", "scores_not_transposed")
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("rope_one_angle", "rope_position_off_by_one", "rope_half_split", "rope_sin_sign", "rope_not_applied",
            "rope_query_only", "rope_transposed_scores")

# level: (n tokens, pairs m, the angles θ to draw from (one per pair), first positions to draw from)
SIZES = {1: (2, 1, ((90,),), (0, 1)),
         2: (3, 1, ((90,), (60,)), (0, 1)),
         3: (3, 2, ((90, 30), (60, 30), (30, 90)), (0, 1))}
VALUES = {1: (0, 1, 2), 2: (-1, 0, 1, 2), 3: (-1, 0, 1, 2)}
PARTS = ("Q_rot", "K_rot", "scores")
# the conventions a learner may follow on their own numbers (check my work): the pairs taken from the two
# halves, (1, m + 1), (2, m + 2) …, instead of neighbours; positions counted from 1 (else from 0) where
# none are typed; θ_i = 10000^(−2i/d) radians (Vaswani et al.) where no angles are typed
CONVENTIONS = {"half_split": None, "pos_from_one": "pos"}  # flag -> the given value it fills in
DEFAULTED = ("pos", "theta")
GIVEN_SHOWN = {"theta": "degrees"}  # the angles per position step, with their degree signs
BATCH = 64
SQRT3 = math.sqrt(3)


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of Q and K of one shape, rotated at the same positions by the same angles."""
    n, m, thetas, starts = SIZES[level]
    theta = np.array(choice(rng, thetas), dtype=float)  # (m,) degrees
    start = int(choice(rng, starts))
    pos = np.arange(start, start + n, dtype=float)  # (n,)
    given = {"Q": matrices(rng, BATCH, (n, 2 * m), VALUES[level]),  # (B, n, 2m)
             "K": matrices(rng, BATCH, (n, 2 * m), VALUES[level]),  # (B, n, 2m)
             "pos": pos, "theta": theta}
    # Q_rot and K_rot read no record value; the scores are the record's, of the rotated rows: the guarded
    # mistakes of the record (K Qᵀ, Q K of the given rows) are kept apart from them
    return Batch(given, ("Q", "K"), list(PARTS), params=_params(pos, theta), decimals=spec(level).decimals,
                 keep=lambda env: no_zero_lines(env["Q"]) & no_zero_lines(env["K"]), derive=_rotated,
                 sources={"Q_rot": (), "K_rot": ()}, own=MISTAKES)


def _params(pos: np.ndarray, theta: np.ndarray) -> dict:
    """The prompt's placeholders."""
    return {"n": len(pos), "d": 2 * len(theta), "pos_text": ", ".join(str(int(p)) for p in pos),
            "theta_text": ", ".join(f"{int(t)}°" for t in theta), "table": angle_table(pos, theta)}


# ---------------------------------------------------------------- exact rotation
# cos and sin of a multiple of 30° are (w + r√3)/2 with whole w, r (0, ±1/2, ±√3/2, ±1), so a rotated
# entry of whole numbers is (W + R√3)/2 and a score (W + R√3)/4: whole numbers carried exactly, one
# rounding at the end (a score that is 0 is 0.0, not 6e-17).


def _halves(degrees: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """cos and sin of multiples of 30° as whole (w, r): (w + r√3)/2; of any other angle as (2 cos, 0)."""
    found = []
    for x in (np.cos(np.deg2rad(degrees)), np.sin(np.deg2rad(degrees))):
        root = np.abs(np.abs(x) - SQRT3 / 2) < 1e-9
        whole = np.abs(2 * x - np.round(2 * x)) < 1e-9
        found.append((np.where(root, 0.0, np.where(whole, np.round(2 * x), 2 * x)), np.where(root, np.sign(x), 0.0)))
    return tuple(found)


def _turn(X: np.ndarray, degrees: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """X (..., n, 2m) with pair i of row p rotated by degrees[p, i] (n, m), as (W, R): (W + R√3)/2."""
    (cw, cr), (sw, sr) = _halves(degrees)  # (n, m) each
    even, odd = X[..., 0::2], X[..., 1::2]  # (..., n, m)
    W, R = np.empty_like(X), np.empty_like(X)  # (..., n, 2m)
    W[..., 0::2], R[..., 0::2] = even * cw - odd * sw, even * cr - odd * sr
    W[..., 1::2], R[..., 1::2] = even * sw + odd * cw, even * sr + odd * cr
    return W, R


def _paired(m: int) -> tuple[np.ndarray, np.ndarray]:
    """The column order that puts the halves' pairs (i, i + m) side by side (1, m+1, 2, m+2 …), and back."""
    neighbours = np.ravel(np.column_stack([np.arange(m), np.arange(m, 2 * m)]))
    return neighbours, np.argsort(neighbours)


def _turn_pairs(X: np.ndarray, degrees: np.ndarray, half: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """_turn with the pairs of the convention: neighbours, or the two halves (`half`)."""
    if not half:
        return _turn(X, degrees)
    there, back = _paired(X.shape[-1] // 2)
    return tuple(x[..., back] for x in _turn(X[..., there], degrees))


def _plain(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return 2 * X, 0 * X  # X unrotated: (2X + 0√3)/2


def _value(form: tuple[np.ndarray, np.ndarray], denominator: int) -> np.ndarray:
    W, R = form
    return (W + R * SQRT3) / denominator + 0.0  # (+ 0.0: no −0)


def _product(q: tuple[np.ndarray, np.ndarray], k: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """q kᵀ of two rotated forms: (a + b√3)(c + d√3) = (ac + 3bd) + (ad + bc)√3, over 4; (..., n, n)."""
    (a, b), (c, d) = q, k
    return _value((a @ c.mT + 3 * (b @ d.mT), a @ d.mT + b @ c.mT), 4)


def _angles(env, sign: int = 1) -> np.ndarray:
    return rotation_angles(env["pos"], sign * np.asarray(env["theta"], dtype=float))  # (n, m)


def _rotated(env) -> dict[str, np.ndarray]:
    half = bool(env.get("half_split", False))
    q, k = _turn_pairs(env["Q"], _angles(env), half), _turn_pairs(env["K"], _angles(env), half)
    return {"Q_rot": _value(q, 2), "K_rot": _value(k, 2), "scores": _product(q, k)}  # (B, n, 2m) … (B, n, n)


def _one_angle(env) -> dict[str, np.ndarray]:
    """Every position turned by θ alone (in the scores the turns cancel: rope_not_applied's)."""
    degrees = rotation_angles(np.ones(len(env["pos"])), env["theta"])  # (n, m)
    return {"Q_rot": _value(_turn(env["Q"], degrees), 2), "K_rot": _value(_turn(env["K"], degrees), 2)}


def _off_by_one(env) -> dict[str, np.ndarray]:
    """Positions counted the other way (from 1 where they start at 0, from 0 where they start at 1): every row
    turned one step θ too far or too short. The scores see only differences, so only the rotated rows show it."""
    pos = np.asarray(env["pos"], dtype=float)
    shifted = {"pos": pos + (1 if pos[0] == 0 else -1), "theta": env["theta"]}
    return {name: _value(_turn(env[source], _angles(shifted)), 2) for name, source in (("Q_rot", "Q"), ("K_rot", "K"))}


def _half_split(env) -> dict[str, np.ndarray]:
    """Pairs (i, i + m) of the two halves instead of neighbours (2i − 1, 2i); the same as the right pairs for m = 1."""
    if len(env["theta"]) == 1:
        return {}
    q, k = (_turn_pairs(env[name], _angles(env), half=True) for name in ("Q", "K"))
    return {"Q_rot": _value(q, 2), "K_rot": _value(k, 2), "scores": _product(q, k)}


def _sin_sign(env) -> dict[str, np.ndarray]:
    q, k = _turn(env["Q"], _angles(env, -1)), _turn(env["K"], _angles(env, -1))
    return {"Q_rot": _value(q, 2), "K_rot": _value(k, 2), "scores": _product(q, k)}


# {mistake id: env -> {part: what it gives, stacked}}
MISTAKES = {
    "rope_one_angle": _one_angle,
    "rope_position_off_by_one": _off_by_one,
    "rope_half_split": _half_split,
    "rope_sin_sign": _sin_sign,
    "rope_not_applied": lambda env: {"Q_rot": env["Q"], "K_rot": env["K"], "scores": env["Q"] @ env["K"].mT},
    "rope_query_only": lambda env: {"scores": _product(_turn(env["Q"], _angles(env)), _plain(env["K"]))},
    "rope_transposed_scores": lambda env: {"scores": _product(_turn(env["K"], _angles(env)),
                                                              _turn(env["Q"], _angles(env)))},
}


def angle_table(pos: np.ndarray, theta: np.ndarray) -> str:
    """cos and sin of every angle pos_p θ_i that appears, in the prompt's words."""
    angles = sorted({int(round(a)) for a in rotation_angles(pos, theta).ravel()})
    rows = []
    for a in angles:
        (cw, cr), (sw, sr) = _halves(np.array(a, dtype=float))
        rows.append(f"cos {a}° = {_trig_text(int(cw), int(cr))}, sin {a}° = {_trig_text(int(sw), int(sr))}")
    return "; ".join(rows)


def _trig_text(whole: int, root: int) -> str:
    """(whole + root √3)/2 as the prompt writes it: 1, -1/2, √3/2 ≈ 0.866."""
    if root:
        return f"{'-' if root < 0 else ''}√3/2 ≈ {root * SQRT3 / 2:.3f}"
    return str(Fraction(whole, 2))


def exact_cos_sin(degrees: float) -> tuple[sympy.Expr, sympy.Expr]:
    angle = sympy.pi * sympy.Rational(int(round(degrees)), 180)
    return sympy.cos(angle), sympy.sin(angle)


def exact_rotated(X: np.ndarray, pos: np.ndarray, theta: np.ndarray) -> sympy.Matrix:
    """X with each pair rotated by pos_p θ_i, exactly; (n, 2m)."""
    phi = rotation_angles(pos, theta)  # (n, m)
    out = sympy.zeros(*X.shape)
    for p in range(X.shape[0]):
        for i in range(phi.shape[1]):
            c, s = exact_cos_sin(phi[p, i])
            x, y = sympy.Integer(int(X[p, 2 * i])), sympy.Integer(int(X[p, 2 * i + 1]))
            out[p, 2 * i], out[p, 2 * i + 1] = sympy.expand(x * c - y * s), sympy.expand(x * s + y * c)
    return out


# ---------------------------------------------------------------- diagnosis, carrying forward, hand work


def conventional(given: dict) -> dict:
    """The given data with the learner's conventions applied (CONVENTIONS): the positions 0 … n − 1 (or
    1 … n) and the angles θ_i = 10000^(−2i/d) radians, in degrees, where none are typed."""
    n, d = np.shape(given["Q"])[-2:]
    out = dict(given)
    if "pos" not in out:
        out["pos"] = np.arange(n, dtype=float) + bool(given.get("pos_from_one", False))
    if "theta" not in out:
        out["theta"] = np.degrees(frequencies(d))  # (d/2,)
    return out


def mistakes_of(ex: Exercise, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} of this exercise."""
    env = {k: (np.asarray(v, dtype=float)[None] if k in ("Q", "K") else v) for k, v in conventional(ex.given).items()}
    env.update(_rotated(env))
    found = {mid: mistaken(env) for mid, mistaken in MISTAKES.items()}
    return {mid: values[name][0] for mid, values in found.items() if name in values}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex, part.name))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """Q_rot and K_rot from the given rows unless the learner gave them, the scores from those (each
    computed value rounded half-up to `rounding` places; None: exact)."""
    env = dict(values)
    g = conventional(ex.given)
    angles = rotation_angles(g["pos"], g["theta"])  # (n, m)
    for name, X in (("Q_rot", g["Q"]), ("K_rot", g["K"])):
        if name not in env:
            X = np.asarray(X, dtype=float)
            half = bool(g.get("half_split", False))
            if isinstance(rounding, Reach):  # cos and sin as the aid gives them, each written
                there, back = _paired(X.shape[-1] // 2) if half else (slice(None), slice(None))
                rotated = _with_aids(X[..., there], angles, rounding)[..., back]
            else:
                rotated = _value(_turn_pairs(X, angles, half), 2)
            env[name] = round_half_up(rotated, rounding)
    if "scores" not in env:
        with np.errstate(invalid="ignore", over="ignore"):
            env["scores"] = round_half_up(np.asarray(env["Q_rot"]) @ np.asarray(env["K_rot"]).mT, rounding)
    return env


def _with_aids(X: np.ndarray, angles: np.ndarray, rounding: Reach) -> np.ndarray:
    """X (n, 2m) rotated with cos and sin as the aid gives them (√3/2 ≈ 0.866, or 0.87), each written."""
    c = rounding.write(np.cos(np.deg2rad(angles)))  # (n, m), stacked in the reach run
    s = rounding.write(np.sin(np.deg2rad(angles)))
    even, odd = X[..., 0::2], X[..., 1::2]  # (n, m)
    out = np.empty((*np.shape(c)[:-1], X.shape[-1]))  # (…, n, 2m)
    out[..., 0::2], out[..., 1::2] = even * c - odd * s, even * s + odd * c
    return out


def _rotation_operations(X: np.ndarray, pos: np.ndarray, theta: np.ndarray) -> budget.Operations:
    """Each rotated cell: x cos φ and ∓ y sin φ, nothing for a zero factor, an addition for ±1."""
    total = budget.NONE
    (cw, cr), (sw, sr) = _halves(rotation_angles(pos, theta))  # (n, m) each
    c, s = (cw + cr * SQRT3) / 2, (sw + sr * SQRT3) / 2
    for p in range(X.shape[0]):
        for i in range(c.shape[1]):
            R = np.array([[c[p, i], -s[p, i]], [s[p, i], c[p, i]]])
            total = total + budget.product_operations(X[p:p + 1, 2 * i:2 * i + 2], R.T)
    return total


def operations(ex: Exercise) -> budget.Operations:
    """cos and sin of each angle read off the table once, the two rotations, the scores from the rotated
    rows, every cell written."""
    g = ex.given
    angles = np.unique(np.mod(rotation_angles(g["pos"], g["theta"]), 360.0))  # the distinct angles (degrees)
    total = budget.Operations(lookups=2 * len(angles))
    for X in (g["Q"], g["K"]):
        total = total + _rotation_operations(X, g["pos"], g["theta"])
    total = total + budget.product_operations(ex.part("Q_rot").reference, ex.part("K_rot").reference.T)
    return total + budget.parts_written(ex)


# ---------------------------------------------------------------- worked solution


def _trig_number(x: sympy.Expr):
    """A number of the table (0, ±1/2, ±√3/2, ±1) or a multiple of one exactly; a sum such as 1 − √3
    to 3 decimals (a factor of a product is one number)."""
    x = sympy.nsimplify(sympy.expand(x))
    if x.is_Rational or (x / sympy.sqrt(3)).is_Rational:
        return exact_number(x)
    text = L.decimal(float(x), 3)
    return solutions.number(text, None, not L.is_exact_decimal(text, float(x)))


def _angles_step(ex: Exercise):

    pos, theta = ex.given["pos"], ex.given["theta"]
    phi = rotation_angles(pos, theta)  # (n, m)

    def derive(p: int, i: int):
        terms = [(solutions.number(str(int(pos[p]))), solutions.number(str(int(theta[i]))))]
        latex, sub = solutions.worked_chain(rf"\varphi_{{{L.index(p, i)}}}", str(int(phi[p, i])), float(phi[p, i]), 0,
                                            L.product(str(int(pos[p])), str(int(theta[i]))), "sum", terms,
                                            rf"\mathrm{{pos}}_{{{p + 1}}} \, \theta_{{{i + 1}}}")
        return solutions.CellDerivation(latex, msg("solution.rope.angles.cell"), (sub,))

    return solutions.make_step("angles", msg("solution.rope.angles"), phi, 0, symbol=r"\varphi",
                               lhs=r"\varphi_{pi}", formula=r"\mathrm{pos}_{p} \, \theta_{i}",
                               exact_cells=[[str(int(x)) for x in row] for row in phi],
                               note=msg("solution.rope.angles.note"), derive=derive)


def _rotation_step(ex: Exercise, name: str, source: str):
    """Each pair of row p turned by φ_pi: two products per cell, cos and sin from the table."""

    part = ex.part(name)
    g = ex.given
    X = np.asarray(g[source], dtype=float)
    E = exact_rotated(X, g["pos"], g["theta"])
    phi = rotation_angles(g["pos"], g["theta"])
    cells = [[L.short(E[r, c]) for c in range(E.shape[1])] for r in range(E.shape[0])]
    x = source.lower()
    symbol = rf"{source}_{{\mathrm{{rot}}}}"

    def derive(p: int, c: int):
        i, second = divmod(c, 2)
        cos, sin = exact_cos_sin(phi[p, i])
        a, b = int(X[p, 2 * i]), int(X[p, 2 * i + 1])
        factors = (cos, -sin) if not second else (sin, cos)
        pairs = [(solutions.number(str(a)), _trig_number(factors[0])),
                 (solutions.number(str(b)), _trig_number(factors[1]))]
        first, other = f"{x}_{{{L.index(p, 2 * i)}}}", f"{x}_{{{L.index(p, 2 * i + 1)}}}"
        ang = rf"\varphi_{{{L.index(p, i)}}}"
        symbolic = (rf"{first} \cos {ang} - {other} \sin {ang}" if not second
                    else rf"{first} \sin {ang} + {other} \cos {ang}")
        latex, sub = solutions.worked_chain(L.cell(symbol, p, c), cells[p][c], float(E[p, c]), part.decimals,
                                            L.total([L.product(u.text, v.text) for u, v in pairs]), "sum", pairs,
                                            symbolic)
        return solutions.CellDerivation(latex, msg("solution.rope.rotate.cell", angle=int(round(phi[p, i]))), (sub,))

    formula = (rf"\begin{{bmatrix}} {x}'_{{2i-1}} & {x}'_{{2i}} \end{{bmatrix}} = "
               rf"\begin{{bmatrix}} {x}_{{2i-1}} & {x}_{{2i}} \end{{bmatrix}} "
               r"\begin{bmatrix} \cos\varphi & \sin\varphi \\ -\sin\varphi & \cos\varphi \end{bmatrix}")
    return solutions.make_step(name, msg(f"solution.rope.{name}"), part.reference, part.decimals, symbol=symbol,
                               lhs=symbol, formula=formula, exact_cells=cells, note=msg("solution.rope.rotate.note"),
                               derive=derive)


def _scores_step(ex: Exercise):
    part = ex.part("scores")
    q, k = ex.part("Q_rot"), ex.part("K_rot")
    g = ex.given
    E = sympy.expand(exact_rotated(g["Q"], g["pos"], g["theta"]) * exact_rotated(g["K"], g["pos"], g["theta"]).T)
    step = product_step("scores", msg("solution.rope.scores"), part.reference, part.decimals, symbol="S",
                        formula=r"Q_{\mathrm{rot}} K_{\mathrm{rot}}^{\top}", left=carried_grid(q.reference, q.decimals),
                        right=carried_grid(k.reference.T, k.decimals), left_symbol=r"Q_{\mathrm{rot}}",
                        right_symbol=r"K_{\mathrm{rot}}^{\top}", note=msg("solution.rope.scores.note"), exact=E,
                        cell_note=msg("solution.rope.scores.cell") if _rounded(q, k) else None)
    if step.work_result is not None and step.work_result != step.decimals:  # two matrices: say which is which
        step = replace(step, note=msg("solution.rope.scores.note_rounded"))
    return step


def _rounded(*parts: Part) -> bool:
    return any(p.decimals > 0 for p in parts)


def _relative_step(ex: Exercise):
    """One score again from the unrotated q_p and k_r and the difference of their angles alone."""
    g = ex.given
    pos, theta = g["pos"], g["theta"]
    n = g["Q"].shape[0]
    p, r = 0, n - 1  # the first query and the last key: the largest difference
    turned = exact_rotated(g["K"][r:r + 1], np.array([pos[r] - pos[p]]), theta)  # (1, 2m): k_r R(Δ)
    q = [int(x) for x in g["Q"][p]]
    value = ex.part("scores").reference[p, r]
    exact = L.short(sympy.expand(sum(q[c] * turned[0, c] for c in range(len(q)))))
    pairs = [(solutions.number(str(q[c])), _trig_number(turned[0, c])) for c in range(len(q))]
    delta = int(pos[r] - pos[p])
    middle = rf"q_{{{p + 1}}} \cdot \left(k_{{{r + 1}}} R({delta}\theta)\right)"
    latex, sub = solutions.worked_chain(L.cell("S", p, r), exact, float(value), ex.part("scores").decimals,
                                        L.total([L.product(a.text, b.text) for a, b in pairs]), "sum", pairs, middle)
    work = [(rf"k_{{{r + 1}}} R({delta}\theta)", L.APPROX if any(b.rounded for _, b in pairs) else "=",
             L.bmatrix([[b.text for _, b in pairs]]))]

    def derive(_: int, __: int):
        return solutions.CellDerivation(latex, msg("solution.rope.relative.cell", delta=delta), (sub,))

    return solutions.make_step("relative", msg("solution.rope.relative"), np.array([[value]]),
                               ex.part("scores").decimals, symbol=L.cell("S", p, r),
                               formula=relative_formula(p, r),
                               work=work, exact_cells=[[exact]], note=msg("solution.rope.relative.note"),
                               derive=derive)


def relative_formula(p: int, r: int) -> str:
    """S_pr from the unrotated rows: q_p R(φ_p) (k_r R(φ_r))ᵀ = q_p R((pos_p − pos_r)θ) k_rᵀ (0-based p, r)."""
    return (rf"q_{{{p + 1}}} R\left((\mathrm{{pos}}_{{{p + 1}}} - \mathrm{{pos}}_{{{r + 1}}})\theta\right) "
            rf"k_{{{r + 1}}}^{{\top}}")


def solve(ex: Exercise) -> list:
    """The angles, the rotated queries and keys (exact, from the cos/sin table), the scores from the
    rotated rows as written, and one score again from the position difference alone."""
    return [_angles_step(ex), _rotation_step(ex, "Q_rot", "Q"), _rotation_step(ex, "K_rot", "K"), _scores_step(ex),
            _relative_step(ex)]


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"q' = q\,R(\mathrm{pos}\,\theta)")
SHEET = SheetSection("forward", (
    Formula(r"\begin{bmatrix} x'_{2i-1} & x'_{2i} \end{bmatrix} = \begin{bmatrix} x_{2i-1} & x_{2i} \end{bmatrix}"
            r"\begin{bmatrix} \cos\varphi & \sin\varphi \\ -\sin\varphi & \cos\varphi \end{bmatrix}, \qquad "
            r"\varphi = \mathrm{pos} \cdot \theta_{i}", "formulas.rope.rotate"),
    Formula(r"[[S | n | n]] = Q_{\mathrm{rot}} K_{\mathrm{rot}}^{\top}, \qquad "
            r"S_{pr} = q_{p} R\left((\mathrm{pos}_{p} - \mathrm{pos}_{r})\theta\right) k_{r}^{\top}",
            "formulas.rope.relative"),
))
