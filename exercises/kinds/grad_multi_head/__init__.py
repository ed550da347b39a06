"""Multi-head attention backward, through out = concat · W_O and back into one head.

    G_concat = G_out W_Oᵀ            G_W_O = concatᵀ G_out
    [G_O1 | G_O2 | …] = G_concat     (the columns of head i are the gradient of its output O_i)
    G_V1 = A1ᵀ G_O1                   (head 1's O_1 = A_1 V_1)

Given: each head's weights A_i (a real softmax: simple fractions, positive wherever the mask lets a
key be seen) and values V_i, their concatenation, W_O and the incoming gradient G_out. The mistakes
are this kind's own (grad_mh_* in its locales) and the catalogued grad_v_no_transpose; no pipeline
step makes these parts, so the kind keeps them apart itself: generate builds them from pieces known to
keep most of them apart (W_O, G_out) and checks only the two parts the heads decide (G_V1, G_W_O).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import sympy

from attention_core.multi_head import head_output_backward, output_projection_backward, split_heads

from ... import solutions
from ...core import budget, misconceptions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import decimals_for, nonzero_matrix, round_half_up, simple_weights
from ...i18n import msg
from ...rendering import latex as L
from .._shared import backward as B
from .._shared.hand import carried_grid, given_grid, own_diagnosis, product_step
from .._shared.values import whole_values

ID = "grad_multi_head"
ORDER = 275  # after backprop: the backward kinds' last, beside multi_head's forward
VERSION = 2  # 2: constructive generator (issue 14): W_O and G_out from pieces whose mistakes are apart by
# construction, head 1's weights and the last head drawn again alone while G_V1's or G_W_O's clash
LEVELS = (1, 2, 3)
GUARDS = ()  # no pipeline step makes these parts: the kind keeps its own mistakes apart (generate)

# level: (n tokens, heads h, d_v per head, d_out)
SIZES = {1: (2, 2, 1, 2), 2: (3, 2, 1, 2), 3: (3, 2, 2, 2)}
WEIGHT_VALUES = (-1, 0, 1)
MAX_TRIES = 500


def head_count(given: dict) -> int:
    return sum(1 for name in given if name[:1] == "A" and name[1:].isdigit())


def collides(ex: Exercise, guards: tuple[str, ...]) -> bool:
    """misconceptions.collides(ex, guards): with no guards (this kind's), no mistake is asked: never."""
    return misconceptions.collides(ex, guards) if guards else False


def _draft(rng: np.random.Generator, level: int) -> Draft:
    n, h, d_v, d_out = SIZES[level]
    s = spec(level)
    causal = bool(rng.integers(2))
    values = tuple(v for v in whole_values(level))
    given: dict = {}
    for i in range(1, h + 1):
        given[f"A{i}"] = simple_weights(rng, n, s.denominators, causal)  # (n, n), rows sum to 1
        given[f"V{i}"] = nonzero_matrix(rng, (n, d_v), values)  # (n, d_v)
    concat = np.concatenate([given[f"A{i}"] @ given[f"V{i}"] for i in range(1, h + 1)], axis=1)  # (n, h·d_v)
    given["concat"] = concat
    given["W_O"] = nonzero_matrix(rng, (h * d_v, d_out), WEIGHT_VALUES)  # (h·d_v, d_out)
    given["G_out"] = nonzero_matrix(rng, (n, d_out), values)  # (n, d_out)
    given["causal"] = causal
    references = references_of(given)
    parts = [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, s.decimals))
             for name, ref in references.items()]
    return Draft(given=given, parts=parts, params={"n": n, "h": h, "d_v": d_v, "width": h * d_v, "d_out": d_out})


def references_of(given: dict) -> dict[str, np.ndarray]:
    """G_concat, G_W_O, each head's G_O and head 1's G_V, through attention_core."""
    h = head_count(given)
    G_concat, G_W_O = output_projection_backward(given["concat"], given["W_O"], given["G_out"])
    heads = split_heads(G_concat, [given[f"V{i}"].shape[1] for i in range(1, h + 1)])
    out = {"G_concat": G_concat, "G_W_O": G_W_O, **{f"G_O{i}": g for i, g in enumerate(heads, start=1)}}
    out["G_V1"] = head_output_backward(given["A1"], given["V1"], heads[0])[1]
    return out


def generate(rng: np.random.Generator, level: int) -> Draft:
    """Heads whose mistakes all differ from the answers and from each other (to 2 decimals too), built
    piece by piece from pieces known to be admissible (issue 14):
    - W_O from _w_o_table: no zero row or column, two heads' rows never equal and, square, neither
      symmetric nor I, head 1's block not [I | 0]; G_out of full column rank without a zero row. Then
      G_out M ≠ 0 for every nonzero M,
      and G_concat's, each G_O's mistakes are whole numbers at least 1 away from the answer and each other
      (G_out (W_Oᵀ − W_O), G_out (I − W_Oᵀ), G_out (W_O − I), G_out (B_i − B_next)ᵀ), none of those parts 0;
    - G_V1 and G_W_O then depend on the heads: A1 is drawn again alone while G_V1's mistakes clash (or G_V1
      is 0), the last head alone while G_W_O's do, both by the rule _apart decides by.
    The time budget holds at every level even when every product term is a multiply-add (tested), so it is
    not counted here.
    tests/test_kinds_grad_multi_head_constructive.py holds every exercise to _apart and all_apart."""
    n, h, d_v, d_out = SIZES[level]
    s = spec(level)
    values = whole_values(level)
    table = _w_o_table(h * d_v, d_out, d_v)
    for _ in range(MAX_TRIES):
        causal = bool(rng.integers(2))
        W_O = table[int(rng.integers(len(table)))].copy()  # (h·d_v, d_out)
        G_out = _g_out(rng, n, d_out, values)  # (n, d_out)
        G_concat = G_out @ W_O.T  # (n, h·d_v)
        heads = [G_concat[:, k * d_v:(k + 1) * d_v] for k in range(h)]  # split_heads' columns
        weights = _weights_table(level, n, causal)
        A = [weights[int(rng.integers(len(weights)))].copy() for _ in range(h)]  # (n, n) each, rows sum to 1
        V = [_whole(rng, (n, d_v), values) for _ in range(h)]  # (n, d_v) each, as numbers.nonzero_matrix
        given = _given(A, V, W_O, G_out, causal)
        for _ in range(HEAD_TRIES):  # head 1's weights alone: G_V1 = A1ᵀ G_O1
            if _part_apart(given, "G_V1", A[0].T @ heads[0], heads, s.decimals):
                break
            A[0] = weights[int(rng.integers(len(weights)))].copy()
            given = _given(A, V, W_O, G_out, causal)
        else:
            continue
        for _ in range(HEAD_TRIES):  # the last head alone: G_W_O = concatᵀ G_out
            if _part_apart(given, "G_W_O", given["concat"].T @ G_out, heads, s.decimals):
                break
            A[-1] = weights[int(rng.integers(len(weights)))].copy()
            V[-1] = _whole(rng, (n, d_v), values)
            given = _given(A, V, W_O, G_out, causal)
        else:
            continue
        if h == 1 and not _part_apart(given, "G_V1", A[0].T @ heads[0], heads, s.decimals):
            continue  # one head: the last head is head 1, drawn again for G_W_O
        # references_of(given), from the products made already (the same values: tested)
        references = {"G_concat": G_concat, "G_W_O": given["concat"].T @ G_out,
                      **{f"G_O{k}": head for k, head in enumerate(heads, start=1)},
                      "G_V1": A[0].T @ heads[0]}
        parts = [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, s.decimals))
                 for name, ref in references.items()]
        return Draft(given=given, parts=parts,
                     params={"n": n, "h": h, "d_v": d_v, "width": h * d_v, "d_out": d_out})
    raise RuntimeError(f"grad_multi_head: no variant in {MAX_TRIES} draws")


HEAD_TRIES = 50  # draws of one head's pieces before the whole exercise is drawn again


def _given(A: list[np.ndarray], V: list[np.ndarray], W_O: np.ndarray, G_out: np.ndarray, causal: bool) -> dict:
    given: dict = {}
    for i, (a, v) in enumerate(zip(A, V), start=1):
        given[f"A{i}"], given[f"V{i}"] = a, v
    given["concat"] = np.concatenate([a @ v for a, v in zip(A, V)], axis=1)  # (n, h·d_v)
    given["W_O"], given["G_out"], given["causal"] = W_O, G_out, causal
    return given


def _w_o_table(rows: int, cols: int, d_v: int) -> np.ndarray:
    """Every W_O (rows = h·d_v, cols = d_out) over WEIGHT_VALUES with no zero row or column (nonzero_matrix's
    rule) whose head blocks of d_v rows differ from the next head's, whose first block is not [I | 0] and
    which, square, is neither symmetric nor the identity. At most 3⁸ candidates, enumerated once (a few
    ms); read-only."""
    key = (rows, cols, d_v)
    if key not in _W_O:
        grid = np.array(list(itertools.product(WEIGHT_VALUES, repeat=rows * cols)), dtype=float)
        W = grid.reshape(-1, rows, cols)
        nonzero = W != 0
        keep = nonzero.any(axis=2).all(axis=1) & nonzero.any(axis=1).all(axis=1)
        h = rows // d_v
        blocks = W.reshape(-1, h, d_v, cols)
        for i in range(h if h > 1 else 0):
            keep &= (blocks[:, i] != blocks[:, (i + 1) % h]).any(axis=(1, 2))
        if rows == cols:
            keep &= (W != W.transpose(0, 2, 1)).any(axis=(1, 2)) & (W != np.eye(rows)).any(axis=(1, 2))
        if cols >= d_v:  # G_O1 is not G_out's first d_v columns (the mistake that skips W_O, in G_V1)
            keep &= (W[:, :d_v] != np.eye(d_v, cols)).any(axis=(1, 2))
        table = np.ascontiguousarray(W[keep])
        table.setflags(write=False)
        _W_O[key] = table
    return _W_O[key]


_W_O: dict[tuple[int, int, int], np.ndarray] = {}


def _weights_table(level: int, n: int, causal: bool) -> np.ndarray:
    """Every weight matrix (n, n) numbers.simple_weights can give at the level, each once: row i is c / Σc
    for whole counts c ≥ 1 on the keys it sees (every key, or keys 1..i+1 under the causal mask; Σc one of
    the level's shares, a divisor of 12), 0 on the keys the mask hides: the softmax of the scores ln c.
    At most 13³ matrices (level 3, no mask), enumerated once; read-only."""
    key = (level, n, causal)
    if key not in _WEIGHTS:
        denominators = spec(level).denominators
        shares = sorted({int(m * d) for d in denominators for m in (1, 2) if 12 % int(m * d) == 0})
        rows = []
        for i in range(n):
            v = i + 1 if causal else n
            seen = set()
            for q in shares:
                for cuts in itertools.combinations(range(1, q), v - 1) if q >= v else ():
                    counts = np.diff([0, *cuts, q])
                    seen.add(tuple(float(x) for x in counts / q) + (0.0,) * (n - v))
            rows.append(sorted(seen))
        table = np.array(list(itertools.product(*rows)), dtype=float).reshape(-1, n, n)
        table.setflags(write=False)
        _WEIGHTS[key] = table
    return _WEIGHTS[key]


_WEIGHTS: dict[tuple[int, int, bool], np.ndarray] = {}


def _g_out(rng: np.random.Generator, n: int, d_out: int, values) -> np.ndarray:
    """G_out (n, d_out) of whole values with no zero row and full column rank (drawn again, alone, until so)."""
    return _whole(rng, (n, d_out), values, full_rank=True)


def _whole(rng: np.random.Generator, shape: tuple[int, int], values, full_rank: bool = False) -> np.ndarray:
    """A matrix of `values` drawn with one call, again until no row and no column is all zeros (a single
    row or column: no zero at all, numbers.nonzero_matrix's rule) and, with `full_rank`, its columns are
    independent; the tests in plain Python (a few cells: numpy's per-call cost would dominate)."""
    rows, cols = shape
    options = tuple(float(v) for v in values)
    while True:
        cells = [options[k] for k in rng.integers(len(options), size=rows * cols).tolist()]
        M = [cells[r * cols:(r + 1) * cols] for r in range(rows)]
        if 1 in shape:
            if not all(cells):
                continue
        elif not (all(any(row) for row in M) and all(any(row[c] for row in M) for c in range(cols))):
            continue
        if full_rank and not _full_column_rank(M):
            continue
        return np.array(M, dtype=float)


def _full_column_rank(M: list[list[float]]) -> bool:
    """The columns of M (rows of whole numbers) are independent: exactly, from its 2 × 2 minors when it has
    two columns."""
    if len(M[0]) == 2:
        return any(a[0] * b[1] != a[1] * b[0] for k, a in enumerate(M) for b in M[k + 1:])
    return int(np.linalg.matrix_rank(np.array(M, dtype=float))) == len(M[0])


# ---------------------------------------------------------------- mistakes, diagnosis, carrying forward


def _apart(given: dict, parts) -> bool:
    """_shared.hand.all_apart(parts, lambda p: mistakes_of(given, p.name)): no part's mistakes within its
    separation of its answer or of each other (misconceptions.clashes' rules: a value holding a NaN left
    out, ±∞ as its stand-in), G_out W_Oᵀ and its split computed once for all the parts."""
    heads = _heads_of(given)
    return all(_clear(given, p, heads) for p in parts)


def _clear(given: dict, p: Part, heads) -> bool:
    """Part p's mistakes are apart from its answer and from each other (_apart's rule for one part)."""
    return _clear_of(p.reference, mistakes_of(given, p.name, p.shape, heads).values(), misconceptions.separation(p))


def _clear_of(reference: np.ndarray, mistaken, gap: float) -> bool:
    values = [_comparable(alt) for alt in mistaken if not np.isnan(alt).any()]
    reference = _comparable(reference)
    if any(np.abs(v - reference).max(initial=0.0) <= gap for v in values):
        return False
    return not any(np.abs(a - b).max() <= gap for k, a in enumerate(values) for b in values[k + 1:])


def _part_apart(given: dict, name: str, reference: np.ndarray, heads, decimals: int) -> bool:
    """The part `name` with this reference (graded to `decimals`) is not all zeros and _clear (generate's
    check of one piece, without making the Part)."""
    if not np.abs(reference).max() > 0:
        return False
    return _clear_of(reference, mistakes_of(given, name, reference.shape, heads).values(),
                     _separation(decimals_for(reference, decimals)))


@functools.cache
def _separation(decimals: int) -> float:
    """misconceptions.separation of a part graded to `decimals` places (it depends on those alone)."""
    return misconceptions.separation(Part(name="G", shape=(1, 1), reference=np.zeros((1, 1)), decimals=decimals))


def _comparable(value) -> np.ndarray:
    value = np.asarray(value, dtype=float)
    infinite = np.isinf(value)
    return np.where(infinite, np.sign(value) * 1e15, value) if infinite.any() else value  # as clashes


def _heads_of(given: dict) -> list[np.ndarray]:
    """G_concat = G_out W_Oᵀ split into the heads' columns."""
    h = head_count(given)
    return split_heads(given["G_out"] @ given["W_O"].T, [given[f"V{i}"].shape[1] for i in range(1, h + 1)])


def mistakes_of(given: dict, name: str, shape: tuple[int, int] | None = None,
                heads: list[np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} (only those of the part's shape can match; `shape` and
    `heads`, _heads_of(given), when the caller has them)."""
    concat, W_O, G_out = given["concat"], given["W_O"], given["G_out"]
    h = head_count(given)
    widths = [given[f"V{i}"].shape[1] for i in range(1, h + 1)]
    G_concat = G_out @ W_O.T  # (n, h·d_v)
    heads = split_heads(G_concat, widths) if heads is None else heads
    found: dict[str, np.ndarray] = {}
    if name == "G_concat":
        if W_O.shape[0] == W_O.shape[1]:
            found["grad_mh_concat_no_transpose"] = G_out @ W_O
        if G_out.shape == G_concat.shape:
            found["grad_mh_skips_w_o"] = G_out
    elif name == "G_W_O":
        found["grad_mh_w_o_transposed"] = G_out.T @ concat  # (d_out, h·d_v): its shape only when square
        found["grad_mh_w_o_not_summed"] = concat[-1:].T @ G_out[-1:]  # the last token's share only
    elif name.startswith("G_O"):
        i = int(name[3:])
        found["grad_mh_wrong_head"] = heads[i % h]  # the next head's columns
    elif name == "G_V1":
        A1 = given["A1"]
        found["grad_v_no_transpose"] = A1 @ heads[0]
        if G_out.shape[1] >= widths[0]:
            found["grad_mh_skips_w_o"] = A1.T @ G_out[:, :widths[0]]
    shape = _shape_of(given, name) if shape is None else tuple(shape)
    return {mid: alt for mid, alt in found.items() if alt.shape == shape}


def _shape_of(given: dict, name: str) -> tuple[int, int]:
    return references_of(given)[name].shape


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex.given, part.name))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """G_concat and G_W_O from the given data unless the learner gave them, each head's G_O from the
    learner's G_concat, G_V1 from their G_O1 (each computed value rounded half-up to `rounding`)."""
    env = dict(values)
    g = ex.given
    h = head_count(g)
    with np.errstate(invalid="ignore", over="ignore"):
        G_concat, G_W_O = output_projection_backward(g["concat"], g["W_O"], g["G_out"])
        env.setdefault("G_concat", round_half_up(G_concat, rounding))
        env.setdefault("G_W_O", round_half_up(G_W_O, rounding))
        heads = split_heads(env["G_concat"], [g[f"V{i}"].shape[1] for i in range(1, h + 1)])
        for i, head in enumerate(heads, start=1):
            env.setdefault(f"G_O{i}", head)
        env.setdefault("G_V1", round_half_up(np.asarray(g["A1"]).T @ np.asarray(env["G_O1"]), rounding))
    return env


def _operations(given: dict, parts) -> object:
    total = budget.product_operations(given["G_out"], given["W_O"].T)
    total = total + budget.product_operations(given["concat"].T, given["G_out"])
    G_O1 = next(p.reference for p in parts if p.name == "G_O1")
    total = total + budget.product_operations(given["A1"].T, G_O1)
    return total + budget.Operations(cells=sum(int(np.prod(p.shape)) for p in parts))


def operations(ex: Exercise):
    """G_out W_Oᵀ, concatᵀ G_out, A1ᵀ G_O1 by hand; the split is reading columns off; every cell written."""
    return _operations(ex.given, ex.parts)


# ---------------------------------------------------------------- worked solution


def _exact(M: np.ndarray) -> sympy.Matrix:
    """A given matrix of small fractions, exactly."""
    return sympy.Matrix([[L.to_exact(float(x)) for x in row] for row in np.atleast_2d(M)])


def loss(p: dict[str, np.ndarray], given: dict) -> float:
    """L = Σ out ⊙ G_out, out = [A1 V1 | A2 V2 | …] W_O."""
    h = head_count(given)
    concat = np.concatenate([given[f"A{i}"] @ p.get(f"V{i}", given[f"V{i}"]) for i in range(1, h + 1)], axis=1)
    return float(np.sum((concat @ p.get("W_O", given["W_O"])) * given["G_out"]))


def _split_step(ex: Exercise, i: int, widths: list[int]):
    part = ex.part(f"G_O{i}")
    start = sum(widths[:i - 1])
    symbol = rf"G_{{O_{i}}}"
    exact = [[L.short(L.to_exact(float(x))) for x in row] for row in part.reference]

    def derive(r: int, c: int):
        latex = L.chain(L.cell(symbol, r, c), L.cell(r"G_{\mathrm{concat}}", r, start + c),
                        L.decimal(part.reference[r, c], part.decimals))
        return solutions.CellDerivation(latex, msg("solution.grad_multi_head.split.cell", head=i,
                                                   column=start + c + 1))

    cols = f"{start + 1}" if widths[i - 1] == 1 else f"{start + 1}..{start + widths[i - 1]}"
    return solutions.make_step(f"G_O{i}", msg("solution.grad_multi_head.split", head=i), part.reference,
                               part.decimals, symbol=symbol,
                               formula=rf"G_{{\mathrm{{concat}}}}[:, {cols}]", exact_cells=exact,
                               note=msg("solution.grad_multi_head.split.note"), derive=derive)


def solve(ex: Exercise) -> list:
    """G_concat and G_W_O from the given numbers, the split into the heads, head 1's G_V from its G_O1 as
    written, and a finite-difference check of one entry of G_V1."""
    g = ex.given
    h = head_count(g)
    widths = [g[f"V{i}"].shape[1] for i in range(1, h + 1)]
    concat, W_O, G_out, A1 = (np.asarray(g[k], dtype=float) for k in ("concat", "W_O", "G_out", "A1"))
    p_c, p_w, p_v = ex.part("G_concat"), ex.part("G_W_O"), ex.part("G_V1")
    GC, CT = r"G_{\mathrm{concat}}", r"\mathrm{concat}^{\top}"
    steps = [
        product_step("G_concat", msg("solution.grad_multi_head.G_concat"), p_c.reference, p_c.decimals, symbol=GC,
                     formula=r"G_{\mathrm{out}} W_O^{\top}", left=given_grid(G_out), right=given_grid(W_O.T),
                     left_symbol=r"G_{\mathrm{out}}", right_symbol=r"W_O^{\top}",
                     note=msg("solution.grad_multi_head.G_concat.note"),
                     exact=_exact(G_out) * _exact(W_O).T),
        product_step("G_W_O", msg("solution.grad_multi_head.G_W_O"), p_w.reference, p_w.decimals, symbol=r"G_{W_O}",
                     formula=rf"{CT} G_{{\mathrm{{out}}}}", left=given_grid(concat.T), right=given_grid(G_out),
                     left_symbol=rf"({CT})", right_symbol=r"G_{\mathrm{out}}",
                     note=msg("solution.grad_multi_head.G_W_O.note"), exact=_exact(concat).T * _exact(G_out)),
    ]
    steps += [_split_step(ex, i, widths) for i in range(1, h + 1)]
    G_O1 = ex.part("G_O1")
    steps.append(product_step("G_V1", msg("solution.grad_multi_head.G_V1"), p_v.reference, p_v.decimals,
                              symbol=r"G_{V_1}", formula=r"A_1^{\top} G_{O_1}", left=given_grid(A1.T),
                              right=carried_grid(G_O1.reference, G_O1.decimals), left_symbol=r"A_1^{\top}",
                              right_symbol=r"G_{O_1}", note=msg("solution.grad_multi_head.G_V1.note"),
                              exact=_exact(A1).T * _exact(G_O1.reference)))
    r, c = B.largest(p_v.reference)
    steps.append(B.check_step(msg("solution.grad_multi_head.check"),
                              msg("solution.grad_multi_head.check.note", row=r + 1, col=c + 1),
                              lambda p: loss(p, g), r"\sum \mathrm{out} \odot G_{\mathrm{out}}",
                              {"V1": g["V1"]}, "V1", (r, c), L.cell("V_1", r, c), L.cell(r"G_{V_1}", r, c),
                              float(p_v.reference[r, c]), p_v.decimals))
    return steps


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("backward", r"G_{\mathrm{concat}} = G_{\mathrm{out}} W_O^{\top}")
SHEET = SheetSection("backward", (
    Formula(r"[[G_{\mathrm{concat}} | n | h d_v]] = G_{\mathrm{out}} W_O^{\top}, \qquad "
            r"[[G_{W_O} | h d_v | d_{\mathrm{out}}]] = \mathrm{concat}^{\top} G_{\mathrm{out}}",
            "formulas.grad_multi_head.projection"),
    Formula(r"[\,G_{O_1} \mid G_{O_2} \mid \dots \mid G_{O_h}\,] = G_{\mathrm{concat}}, \qquad "
            r"[[G_{V_i} | n | d_v]] = A_i^{\top} G_{O_i}", "formulas.grad_multi_head.split"),
    Formula(r"G_X = \sum_{i=1}^{h} G_X^{(i)}", "formulas.grad_multi_head.heads"),
), position=260)  # where the sheet had the multi-head backward before it was a kind
