"""Rotary position embedding (RoPE) on 2-D pairs, with angles from a small table.

Row p of Q (and of K) is split into pairs of columns (1, 2), (3, 4), …; pair i is rotated by the
angle φ_pi = pos_p θ_i:

    q'_{2i−1} = q_{2i−1} cos φ − q_{2i} sin φ        q'_{2i} = q_{2i−1} sin φ + q_{2i} cos φ
    scores = Q_rot K_rotᵀ,   S_pr = q_p R(φ_r − φ_p) k_rᵀ: it depends only on the position difference

Angles are multiples of 90° (level 1 and 2) or 30° (level 3 and some of level 2), so cos and sin are
0, ±1/2, ±√3/2, ±1: the prompt lists them. The mistakes are this kind's own (rope_* in its locales:
one angle for every position, the sign of sin, the rotation applied to q only or not at all) and
K_rot Q_rotᵀ; the pipeline's score mistakes on the unrotated Q and K are guarded too (GUARDS).
Rotating V, which these parts cannot show, is asked in `concepts` at level 3 (its rope_rotates question).
Since VERSION 2 level 1 (whole numbers only: turns of 90°) is drawn from the table of its admissible
variants (_level_one, by rule on first use); levels 2 and 3 draw and check (1 draw in 200 refused).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import sympy

from attention_core.positions import rope, rotation_angles

from ... import solutions
from ...core import budget, misconceptions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, decimals_for, nonzero_matrix, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from .._shared.hand import carried_grid, exact_number, own_diagnosis, product_step

ID = "rope"
ORDER = 84  # after multi_head: where a token is, once attention is whole
VERSION = 2  # 2: constructive (issue 14): level 1 drawn from the table of its admissible variants (_level_one:
# a third of VERSION 1's draws were refused there); generate evaluates no sympy (references and the prompt's
# table from the whole-number forms (A + B√3)/2), and the engine's redraw test is the collides hook
LEVELS = (1, 2, 3)
# the pipeline's own score mistakes, made on the unrotated Q and K (misconceptions.alternatives)
GUARDS = ("transposed_scores", "scores_not_transposed")

# level: (n tokens, pairs m, the angles θ to draw from (one per pair), first positions to draw from)
SIZES = {1: (2, 1, ((90,),), (0, 1)),
         2: (3, 1, ((90,), (60,)), (0, 1)),
         3: (3, 2, ((90, 30), (60, 30), (30, 90)), (0, 1))}
VALUES = {1: (0, 1, 2), 2: (-1, 0, 1, 2), 3: (-1, 0, 1, 2)}
PARTS = ("Q_rot", "K_rot", "scores")


def _draft(rng: np.random.Generator, level: int) -> Draft:
    n, m, thetas, starts = SIZES[level]
    theta = np.array(choice(rng, thetas), dtype=float)  # (m,) degrees
    start = int(choice(rng, starts))
    pos = np.arange(start, start + n, dtype=float)  # (n,)
    Q = nonzero_matrix(rng, (n, 2 * m), VALUES[level])  # (n, 2m)
    K = nonzero_matrix(rng, (n, 2 * m), VALUES[level])  # (n, 2m)
    references = exact_references(Q, K, pos, theta)
    decimals = spec(level).decimals
    parts = [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals))
             for name, ref in references.items()]
    return Draft(given={"Q": Q, "K": K, "pos": pos, "theta": theta}, parts=parts, params={})


def _params(given: dict) -> dict:
    """The prompt's placeholders (made once a draft is kept)."""
    Q, pos, theta = given["Q"], given["pos"], given["theta"]
    return {"n": Q.shape[0], "d": Q.shape[1], "pos_text": ", ".join(str(int(p)) for p in pos),
            "theta_text": ", ".join(f"{int(t)}°" for t in theta), "table": angle_table(pos, theta)}


def generate(rng: np.random.Generator, level: int) -> Draft:
    """Rows whose rotation changes something and whose mistakes all differ from the answers and from
    each other (to 2 decimals too). Level 1: one of its admissible variants, none refused (the table is
    every variant the check below accepts: tests/test_kinds_rope_constructive.py); levels 2 and 3 draw
    and check (about 1 draw in 200 is refused)."""
    if level == 1:
        return _level_one_draft(rng)
    while True:
        draft = _draft(rng, level)
        if _all_apart(draft.parts, draft.given):
            return replace(draft, params=_params(draft.given), memo=dict(_CHECKED))


def _all_apart(parts: list[Part], given: dict) -> bool:
    """fast.all_clash_free(parts, guarded_mistakes(given)) as one block: Q and K turned three ways at once
    (the same elementwise operations as _turned, so the same values), the scores' five mistakes as
    guarded_mistakes makes them (each product on its own), then every part's answer and mistakes side by
    side, (3 parts, 6 values, cells), padded where a part has fewer (0 in the cells, a far-off stand-in in
    the values): a part clashes when two of its values are within its separation in every cell, the
    answer and a mistake or two mistakes, as misconceptions.any_clash decides on finite values
    (tests/test_kinds_rope_constructive.py holds the two to each other)."""
    Q, K, pos, theta = (np.asarray(given[k], dtype=float) for k in ("Q", "K", "pos", "theta"))
    c, s = _trig_stack(tuple(pos.tolist()), tuple(theta.tolist()))  # (3, 1, n, m): turned, back, once
    X = np.stack([Q, K])  # (2, n, 2m)
    even, odd = X[..., 0::2], X[..., 1::2]
    turns = np.empty((3, *X.shape))  # (3, 2, n, 2m)
    turns[..., 0::2] = even * c - odd * s
    turns[..., 1::2] = even * s + odd * c
    (Q_rot, K_rot), (Q_back, K_back) = turns[0], turns[1]
    alts = [Q @ K.T, Q_rot @ K.T, K_rot @ Q_rot.T, Q_back @ K_back.T, K @ Q.T]
    if Q.shape[1] == K.shape[0]:
        alts.append(Q @ K)
    by_name = {p.name: p for p in parts}
    n, d = Q.shape
    cells = max(n * d, n * n)
    values = np.zeros((3, 1 + len(alts), cells))
    values[:2, 4:] = _FAR * np.arange(1, len(alts) - 2)[:, None]  # Q_rot's and K_rot's three mistakes only
    values[0, 0, :n * d] = by_name["Q_rot"].reference.ravel()
    values[1, 0, :n * d] = by_name["K_rot"].reference.ravel()
    values[:2, 1:4, :n * d] = np.stack([turns[2], turns[1], X], axis=1).reshape(2, 3, -1)  # one angle, sin, none
    values[2, 0, :n * n] = by_name["scores"].reference.ravel()
    values[2, 1:, :n * n] = np.array(alts).reshape(len(alts), -1)
    gaps = np.array([misconceptions.separation(by_name[name]) for name in PARTS])
    widest = np.abs(values[:, :, None, :] - values[:, None, :, :]).max(axis=-1)  # (3, k, k), 0 on the diagonals
    return np.count_nonzero(widest <= gaps[:, None, None]) == 3 * values.shape[1]


_FAR = 1e9  # the stand-in values apart from everything (the parts' values are a few units at most)


@functools.lru_cache(maxsize=256)
def _trig_stack(pos: tuple[float, ...], theta: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of _trig's three turns (pos θ, −pos θ, one angle θ for every position), (3, 1, n, m)."""
    turns = (_trig(pos, theta, 1), _trig(pos, theta, -1), _trig((1.0,) * len(pos), theta, 1))
    c, s = (np.stack([t[i] for t in turns])[:, None] for i in (0, 1))
    for a in (c, s):
        a.setflags(write=False)
    return c, s


# the engine's redraw test answered by generate's own check: its plain_* mistakes are the registry's two
# (GUARDS, the same values), kept apart from the scores and from each other; misconceptions.collides and
# the collides hook read it from the exercise's memo
_CHECKED = {("collides", GUARDS): False}


def collides(ex: Exercise, guards: tuple[str, ...]) -> bool:
    """misconceptions.collides(ex, guards) for this kind's GUARDS without the pipeline: the registry's two
    score mistakes on the unrotated Q and K are K Qᵀ and (when Q K is defined) Q K, put to the scores as
    clash_by_part does (tests/test_kinds_rope_constructive.py holds the two to each other)."""
    if tuple(guards) != GUARDS:
        return misconceptions.collides(ex, guards=guards)
    memo = ex.__dict__.get("_memo", {})
    if ("collides", GUARDS) in memo:  # generate's check answered it (_CHECKED)
        return memo[("collides", GUARDS)]
    Q, K = np.asarray(ex.given["Q"], dtype=float), np.asarray(ex.given["K"], dtype=float)
    alts = {"transposed_scores": K @ Q.T}
    if Q.shape[1] == K.shape[0]:
        alts["scores_not_transposed"] = Q @ K
    part = ex.part("scores")
    return misconceptions.any_clash(part.reference, alts, misconceptions.separation(part))


def _level_one_draft(rng: np.random.Generator) -> Draft:
    starts, Qs, Ks, table = _level_one()
    start, q, k = table[int(rng.integers(len(table)))].tolist()
    n, _, thetas, _ = SIZES[1]
    given = {"Q": Qs[q].copy(), "K": Ks[k].copy(), "pos": np.arange(starts[start], starts[start] + n, dtype=float),
             "theta": np.array(thetas[0], dtype=float)}
    decimals = spec(1).decimals
    parts = [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals))
             for name, ref in exact_references(given["Q"], given["K"], given["pos"], given["theta"]).items()]
    return Draft(given=given, parts=parts, params=_params(given), memo=dict(_CHECKED))


@functools.cache
def _level_one() -> tuple[tuple[int, ...], np.ndarray, np.ndarray, np.ndarray]:
    """Level 1's admissible variants, enumerated by rule (~3 ms once, 2172 of them): (the first positions,
    the matrices Q may be, those K may be, every admissible (first position, Q, K) as a row of indices).

    Level 1 turns 2 × 2 rows of whole entries by multiples of 90°: cos and sin are 0 and ±1, every part
    and every mistake is a whole matrix, and two of them are within a part's separation (< 1) only when
    equal. So the check of generate is: Q_rot, its three mistakes (one angle, the sign of sin, not
    rotated) all different; the same for K_rot; and the scores Q_rot K_rotᵀ, Q Kᵀ, Q_rot Kᵀ, K_rot Q_rotᵀ,
    Q_back K_backᵀ, K Qᵀ and Q K all different. Q and K: nonzero_matrix's (no row, no column all zeros)."""
    n, m, thetas, starts = SIZES[1]
    (theta,) = thetas[0]
    every = np.array(list(itertools.product(VALUES[1], repeat=n * 2 * m)), dtype=float).reshape(-1, n, 2 * m)
    X = every[(every != 0).any(axis=2).all(axis=1) & (every != 0).any(axis=1).all(axis=1)]  # (N, n, 2)

    def turned(M: np.ndarray, degrees) -> np.ndarray:  # each row p by degrees[p] (multiples of 90°)
        c = np.array([_halves(int(d) % 360)[0][0] / 2 for d in degrees])  # (n,): cos as (A + 0·√3)/2
        s = np.array([_halves(int(d) % 360)[1][0] / 2 for d in degrees])
        out = np.empty_like(M)
        out[..., 0] = M[..., 0] * c - M[..., 1] * s
        out[..., 1] = M[..., 0] * s + M[..., 1] * c
        return out

    def distinct(*values: np.ndarray) -> np.ndarray:  # no two equal, along the leading axes
        # each matrix as one number: its whole entries (|x| < 32) as digits in base 64, exact in a float
        codes = [(v.reshape(*v.shape[:-2], -1) + 32) @ 64.0 ** np.arange(v.shape[-2] * v.shape[-1]) for v in values]
        ok = np.ones(codes[0].shape, dtype=bool)
        for a, b in itertools.combinations(codes, 2):
            ok &= a != b
        return ok

    table = []
    for index, start in enumerate(starts):
        phi = [(start + p) * theta for p in range(n)]
        rot, back, once = turned(X, phi), turned(X, [-a for a in phi]), turned(X, [theta] * n)
        good = np.flatnonzero(distinct(rot, once, back, X))  # Q_rot's (and K_rot's) check
        R, B, P = rot[good], back[good], X[good]  # (g, n, 2)
        Rt, Bt, Pt = R.transpose(0, 2, 1), B.transpose(0, 2, 1), P.transpose(0, 2, 1)

        def pair(A: np.ndarray, Bm: np.ndarray) -> np.ndarray:  # A[i] @ Bm[j] for every (i, j): (g, g, n, n)
            return A[:, None] @ Bm[None, :]  # whole numbers: exact

        S = pair(R, Rt)
        plain = pair(P, Pt)  # Q Kᵀ; its transpose per pair is K Qᵀ (and S's is K_rot Q_rotᵀ)
        ok = distinct(S, plain, pair(R, Pt), S.transpose(0, 1, 3, 2), pair(B, Bt), plain.transpose(0, 1, 3, 2),
                      pair(P, P))  # (g, g): Q index, K index
        i, j = np.nonzero(ok)
        table.append(np.stack([np.full(len(i), index), good[i], good[j]], axis=1))
    table = np.concatenate(table)
    for a in (X, table):
        a.setflags(write=False)
    return tuple(starts), X, X, table


@functools.lru_cache(maxsize=256)
def _trig(pos: tuple[float, ...], theta: tuple[float, ...], sign: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of pos_p · sign θ_i as attention_core.positions.rope computes them; (n, m) each."""
    phi = np.deg2rad(rotation_angles(np.array(pos), sign * np.array(theta)))
    c, s = np.cos(phi), np.sin(phi)
    c.setflags(write=False)
    s.setflags(write=False)
    return c, s


def _turned(X: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """rope(X, pos, θ) from its cos and sin (the same operations, so the same values)."""
    even, odd = X[:, 0::2], X[:, 1::2]
    out = np.empty_like(X)
    out[:, 0::2] = even * c - odd * s
    out[:, 1::2] = even * s + odd * c
    return out


def guarded_mistakes(given: dict) -> dict[str, dict[str, np.ndarray]]:
    """{part: {mistake id: value}} as mistakes_of and _plain_score_mistakes give them, for every part at
    once (each rotation computed once)."""
    Q, K, pos, theta = (np.asarray(given[k], dtype=float) for k in ("Q", "K", "pos", "theta"))
    key = (tuple(pos.tolist()), tuple(theta.tolist()))
    turn, back, once = _trig(*key, 1), _trig(*key, -1), _trig((1.0,) * len(pos), key[1], 1)
    Q_back, K_back = _turned(Q, *back), _turned(K, *back)
    Q_rot, K_rot = _turned(Q, *turn), _turned(K, *turn)
    found = {"Q_rot": {"rope_one_angle": _turned(Q, *once), "rope_sin_sign": Q_back, "rope_not_applied": Q},
             "K_rot": {"rope_one_angle": _turned(K, *once), "rope_sin_sign": K_back, "rope_not_applied": K},
             "scores": {"rope_not_applied": Q @ K.T, "rope_query_only": Q_rot @ K.T,
                        "transposed_scores": K_rot @ Q_rot.T, "rope_sin_sign": Q_back @ K_back.T,
                        "plain_transposed_scores": K @ Q.T}}
    if Q.shape[1] == K.shape[0]:
        found["scores"]["plain_scores_not_transposed"] = Q @ K
    return found


def _plain_score_mistakes(given: dict, name: str) -> dict[str, np.ndarray]:
    """The pipeline's score mistakes on the unrotated Q and K (GUARDS, named by misconceptions.diagnose):
    kept apart from this kind's own too, so that each wrong answer has one name."""
    if name != "scores":
        return {}
    Q, K = np.asarray(given["Q"], dtype=float), np.asarray(given["K"], dtype=float)
    found = {"plain_transposed_scores": K @ Q.T}
    if Q.shape[1] == K.shape[0]:
        found["plain_scores_not_transposed"] = Q @ K
    return found


# ---------------------------------------------------------------- exact rotation and the angle table


def exact_cos_sin(degrees: float) -> tuple[sympy.Expr, sympy.Expr]:
    return _cos_sin(int(round(degrees)))


# the sympy work below depends on a few small whole numbers only (angles, entries): cached by value, so a
# redraw or a new variant reuses it (the same expressions, so the same exercises)
@functools.lru_cache(maxsize=4096)
def _cos_sin(degrees: int) -> tuple[sympy.Expr, sympy.Expr]:
    angle = sympy.pi * sympy.Rational(degrees, 180)
    return sympy.cos(angle), sympy.sin(angle)


@functools.lru_cache(maxsize=4096)
def _rotated_pair(x: int, y: int, degrees: int) -> tuple[sympy.Expr, sympy.Expr]:
    c, s = _cos_sin(degrees)
    x, y = sympy.Integer(x), sympy.Integer(y)
    return sympy.expand(x * c - y * s), sympy.expand(x * s + y * c)


def exact_rotated(X: np.ndarray, pos: np.ndarray, theta: np.ndarray, sign: int = 1) -> sympy.Matrix:
    """X with each pair rotated by sign · pos_p θ_i, exactly; (n, 2m)."""
    phi = rotation_angles(pos, theta)  # (n, m)
    out = sympy.zeros(*X.shape)
    for p in range(X.shape[0]):
        for i in range(phi.shape[1]):
            out[p, 2 * i], out[p, 2 * i + 1] = _rotated_pair(int(X[p, 2 * i]), int(X[p, 2 * i + 1]),
                                                             int(round(sign * phi[p, i])))
    return out


# The references without sympy matrices: every cos and sin of the table is (A + B√3)/2 with whole A, B, so a
# rotated entry is (A + B√3)/2 and a score (A + B√3)/4; the floats are those of the same sympy numbers
# (cached by A, B), so the references are the ones the sympy product gives (tests/test_kinds_17b.py)
# cos and sin of the multiples of 30° as (A, B): (A + B√3)/2, by the angle mod 360 (tested against sympy)
HALVES_30 = {0: ((2, 0), (0, 0)), 30: ((0, 1), (1, 0)), 60: ((1, 0), (0, 1)), 90: ((0, 0), (2, 0)),
             120: ((-1, 0), (0, 1)), 150: ((0, -1), (1, 0)), 180: ((-2, 0), (0, 0)), 210: ((0, -1), (-1, 0)),
             240: ((-1, 0), (0, -1)), 270: ((0, 0), (-2, 0)), 300: ((1, 0), (0, -1)), 330: ((0, 1), (-1, 0))}


@functools.lru_cache(maxsize=64)
def _halves(degrees: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """cos and sin of `degrees` as (A, B): (A + B√3)/2 (the table's, else from sympy's exact values)."""
    if degrees % 30 == 0:
        return HALVES_30[degrees % 360]
    return _halves_of_sympy(degrees)


def _halves_of_sympy(degrees: int) -> tuple[tuple[int, int], tuple[int, int]]:
    out = []
    for x in _cos_sin(degrees):
        terms = sympy.expand(2 * x).as_coefficients_dict()
        whole, root = terms.get(sympy.Integer(1), sympy.Integer(0)), terms.get(sympy.sqrt(3), sympy.Integer(0))
        if set(terms) - {sympy.Integer(1), sympy.sqrt(3)} or not (whole.is_Integer and root.is_Integer) \
                or sympy.expand(whole + root * sympy.sqrt(3) - 2 * x) != 0:
            raise ValueError(f"rope: {degrees}° is not in the table")
        out.append((int(whole), int(root)))
    return out[0], out[1]


# the whole-number forms whose float is sympy's, taken without sympy: sympy's evalf of the unevaluated sum
# (Rational(whole, d) + Rational(root, d)·√3) written out with mpmath's integer operations, the same steps
# and precisions (tests/test_kinds_rope_constructive.py: the same floats over this whole box; they agreed on
# all 32 522 forms with |whole| ≤ 80, |root| ≤ 50, d = 2, 4); ~20 µs a form, where sympy's took ~400 µs.
# Outside the box, sympy's own sum.
FLOAT_BOX = (60, 24)  # |whole|, |root|; with denominators 2 and 4 (rotated entries, scores)


@functools.lru_cache(maxsize=8192)
def _float_of(whole: int, root: int, denominator: int) -> float:
    """(whole + root √3) / denominator as a float: the float sympy gives for that sum."""
    if abs(whole) <= FLOAT_BOX[0] and abs(root) <= FLOAT_BOX[1] and denominator in (2, 4):
        if root == 0:
            return whole / denominator  # exact: a halving or two
        return _evalf_sum(whole, root, denominator)
    return float(sympy.Rational(whole, denominator) + sympy.Rational(root, denominator) * sympy.sqrt(3))


@functools.cache
def _sqrt3(prec: int) -> tuple:
    from mpmath.libmp import from_int, mpf_sqrt

    return mpf_sqrt(from_int(3), prec)


def _evalf_root_term(root: int, denominator: int, prec: int) -> tuple:
    """sympy's evalf_mul of Mul(Rational(root, denominator), √3) at `prec` bits: the two factors at
    prec + 7 (its working precision for two factors), their exact product rounded to prec."""
    from mpmath.libmp import bitcount, from_rational, normalize, round_nearest

    s1, m1, e1, _ = from_rational(root, denominator, prec + 7)
    s2, m2, e2, _ = _sqrt3(prec + 7)
    man = m1 * m2
    return normalize(s1 ^ s2, man, e1 + e2, bitcount(man), prec, round_nearest)


def _evalf_sum(whole: int, root: int, denominator: int) -> float:
    """float() of sympy's (whole/d + (root/d)·√3), root ≠ 0, step by step as sympy's evalf takes it:
    Expr.evalf asks 53 + 4 bits; evalf_add evaluates each term at 10 bits more, adds them exactly
    (add_terms), rounds to 57 bits and starts again with more bits while the sum's accuracy is short;
    Float._new rounds the result to 53 bits (or fewer, its accuracy)."""
    from mpmath.libmp import bitcount, from_rational, normalize, round_nearest, to_float

    if whole == 0:  # a Mul alone: evalf_mul at 57 bits, accuracy 57
        s, m, e, b = _evalf_root_term(root, denominator, 57)
        return to_float(normalize(s, m, e, b, 53, round_nearest))
    target = prec = 57
    i = 0
    while True:
        terms = [from_rational(whole, denominator, prec + 10), _evalf_root_term(root, denominator, prec + 10)]
        total, low, errors = 0, 0, []  # the exact sum as total · 2^low (add_terms: no term is far smaller)
        for sign, man, exp, bc in terms:
            errors.append(bc + exp - (prec + 10))
            man = -man if sign else man
            if exp >= low:
                total += man << (exp - low)
            else:
                total, low = (total << (low - exp)) + man, exp
        sign, total = (1, -total) if total < 0 else (0, total)
        accuracy = low + bitcount(total) - max(errors)
        value = normalize(sign, total, low, bitcount(total), target, round_nearest)
        if accuracy >= target:
            break
        prec += max(10 + 2 ** i, target - accuracy)
        i += 1
    s, m, e, b = value
    return to_float(normalize(s, m, e, b, max(min(53, accuracy), 1), round_nearest))


@functools.lru_cache(maxsize=4096)
def _rotated_row(row: tuple[int, ...], angles: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """One row with each pair rotated by its angle (degrees), each entry as (A, B): (A + B√3)/2."""
    out: list[tuple[int, int]] = []
    for i, degrees in enumerate(angles):
        (ca, cb), (sa, sb) = _halves(degrees)
        x, y = row[2 * i], row[2 * i + 1]
        out += [(x * ca - y * sa, x * cb - y * sb), (x * sa + y * ca, x * sb + y * cb)]
    return tuple(out)


@functools.lru_cache(maxsize=8192)
def _score(q: tuple[tuple[int, int], ...], k: tuple[tuple[int, int], ...]) -> float:
    """q · k for two rotated rows: Σ (a + b√3)(c + d√3) / 4."""
    return _float_of(sum(a * c + 3 * b * d for (a, b), (c, d) in zip(q, k)),
                     sum(a * d + b * c for (a, b), (c, d) in zip(q, k)), 4)


@functools.lru_cache(maxsize=4096)
def _row_floats(row: tuple[tuple[int, int], ...]) -> tuple[float, ...]:
    return tuple(_float_of(a, b, 2) for a, b in row)


def exact_references(Q: np.ndarray, K: np.ndarray, pos: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
    """Q_rot, K_rot and Q_rot K_rotᵀ as floats of their exact values (the sympy product's, without it)."""
    angles = [tuple(int(round(a)) for a in row) for row in rotation_angles(pos, theta).tolist()]  # (n, m)
    q = [_rotated_row(tuple(int(x) for x in row), a) for row, a in zip(Q.tolist(), angles)]
    k = [_rotated_row(tuple(int(x) for x in row), a) for row, a in zip(K.tolist(), angles)]
    return {"Q_rot": np.array([_row_floats(row) for row in q]), "K_rot": np.array([_row_floats(row) for row in k]),
            "scores": np.array([[_score(qr, kr) for kr in k] for qr in q])}


@functools.lru_cache(maxsize=8192)
def _float(x: sympy.Expr) -> float:
    return float(sympy.expand(x))


def _floats(M: sympy.Matrix) -> np.ndarray:
    return np.array([[_float(M[i, j]) for j in range(M.shape[1])] for i in range(M.shape[0])])


@functools.lru_cache(maxsize=1024)
def _trig_text(x: sympy.Expr) -> str:
    """1, −1/2, √3/2 ≈ 0.866 as plain text for the prompt's table."""
    x = sympy.nsimplify(x)
    if x.is_Rational:
        return str(x)
    return f"{str(x).replace('sqrt(3)', '√3')} ≈ {float(x):.3f}"


def angle_table(pos: np.ndarray, theta: np.ndarray) -> str:
    """cos and sin of every angle pos_p θ_i that appears, in the prompt's words."""
    return _angle_table(tuple(np.asarray(pos, dtype=float).tolist()), tuple(np.asarray(theta, dtype=float).tolist()))


@functools.lru_cache(maxsize=256)
def _angle_table(pos: tuple[float, ...], theta: tuple[float, ...]) -> str:
    angles = sorted({int(round(a)) for a in rotation_angles(np.array(pos), np.array(theta)).ravel()})
    rows = []
    for a in angles:
        c, s = (_halves_text(*x) for x in _halves(a))
        rows.append(f"cos {a}° = {c}, sin {a}° = {s}")
    return "; ".join(rows)


def _halves_text(whole: int, root: int) -> str:
    """(whole + root √3)/2 of the table as _trig_text writes it: 1, −1/2, √3/2 ≈ 0.866 (no sympy)."""
    if root == 0:
        return str(Fraction(whole, 2))
    if whole == 0 and abs(root) == 1:
        return f"{'-' if root < 0 else ''}√3/2 ≈ {root * math.sqrt(3) / 2:.3f}"
    return _trig_text(sympy.Rational(whole, 2) + sympy.Rational(root, 2) * sympy.sqrt(3))


# ---------------------------------------------------------------- mistakes, diagnosis, carrying forward


def mistakes_of(given: dict, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`}."""
    Q, K, pos, theta = (np.asarray(given[k], dtype=float) for k in ("Q", "K", "pos", "theta"))
    if name in ("Q_rot", "K_rot"):
        X = Q if name == "Q_rot" else K
        return {"rope_one_angle": rope(X, np.ones_like(pos), theta), "rope_sin_sign": rope(X, pos, -theta),
                "rope_not_applied": X}
    Q_rot, K_rot = rope(Q, pos, theta), rope(K, pos, theta)
    # one angle for every position rotates q and k alike: the rotations cancel, as rope_not_applied
    return {"rope_not_applied": Q @ K.T, "rope_query_only": Q_rot @ K.T, "transposed_scores": K_rot @ Q_rot.T,
            "rope_sin_sign": rope(Q, pos, -theta) @ rope(K, pos, -theta).T}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex.given, part.name))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """Q_rot and K_rot from the given rows unless the learner gave them, the scores from those (each
    computed value rounded half-up to `rounding` places; None: exact)."""
    env = dict(values)
    g = ex.given
    for name, X in (("Q_rot", g["Q"]), ("K_rot", g["K"])):
        if name not in env:
            env[name] = round_half_up(rope(X, g["pos"], g["theta"]), rounding)
    if "scores" not in env:
        with np.errstate(invalid="ignore", over="ignore"):
            env["scores"] = round_half_up(np.asarray(env["Q_rot"]) @ np.asarray(env["K_rot"]).T, rounding)
    return env


def _rotation_operations(X: np.ndarray, pos: np.ndarray, theta: np.ndarray):
    """Each rotated cell: x cos φ and ∓ y sin φ, nothing for a zero factor, an addition for ±1."""
    total = budget.NONE
    phi = np.deg2rad(rotation_angles(pos, theta))  # (n, m)
    for p in range(X.shape[0]):
        for i in range(phi.shape[1]):
            R = np.array([[np.cos(phi[p, i]), -np.sin(phi[p, i])], [np.sin(phi[p, i]), np.cos(phi[p, i])]])
            R[np.abs(R) < 1e-12] = 0.0
            total = total + budget.product_operations(X[p:p + 1, 2 * i:2 * i + 2], R.T)
    return total


def operations(ex: Exercise):
    """The two rotations, the scores from the rotated rows, every cell written."""
    g = ex.given
    total = _rotation_operations(g["Q"], g["pos"], g["theta"]) + _rotation_operations(g["K"], g["pos"], g["theta"])
    total = total + budget.product_operations(ex.part("Q_rot").reference, ex.part("K_rot").reference.T)
    return total + budget.Operations(cells=sum(int(np.prod(p.shape)) for p in ex.parts))


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
    return product_step("scores", msg("solution.rope.scores"), part.reference, part.decimals, symbol="S",
                        formula=r"Q_{\mathrm{rot}} K_{\mathrm{rot}}^{\top}", left=carried_grid(q.reference, q.decimals),
                        right=carried_grid(k.reference.T, k.decimals), left_symbol=r"Q_{\mathrm{rot}}",
                        right_symbol=r"K_{\mathrm{rot}}^{\top}", note=msg("solution.rope.scores.note"), exact=E,
                        cell_note=msg("solution.rope.scores.cell") if _rounded(q, k) else None)


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
    middle = rf"q_{{{p + 1}}} \cdot \left(R({delta}\theta)\, k_{{{r + 1}}}\right)"
    latex, sub = solutions.worked_chain(L.cell("S", p, r), exact, float(value), ex.part("scores").decimals,
                                        L.total([L.product(a.text, b.text) for a, b in pairs]), "sum", pairs, middle)
    work = [(rf"R({delta}\theta)\, k_{{{r + 1}}}", L.APPROX if any(b.rounded for _, b in pairs) else "=",
             L.bmatrix([[b.text for _, b in pairs]]))]

    def derive(_: int, __: int):
        return solutions.CellDerivation(latex, msg("solution.rope.relative.cell", delta=delta), (sub,))

    return solutions.make_step("relative", msg("solution.rope.relative"), np.array([[value]]),
                               ex.part("scores").decimals, symbol=L.cell("S", p, r),
                               formula=rf"q_{{{p + 1}}} R\left((\mathrm{{pos}}_{{{r + 1}}} - "
                                       rf"\mathrm{{pos}}_{{{p + 1}}})\theta\right) k_{{{r + 1}}}^{{\top}}",
                               work=work, exact_cells=[[exact]], note=msg("solution.rope.relative.note"),
                               derive=derive)


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
            r"S_{pr} = q_{p} R\left((\mathrm{pos}_{r} - \mathrm{pos}_{p})\theta\right) k_{r}^{\top}",
            "formulas.rope.relative"),
))
