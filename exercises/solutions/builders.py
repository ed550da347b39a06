"""The step builders: one per kind of step in the registry (a matrix product, a scaling, the mask,
the softmax, its backward, G_X, the embedding and its gradient), each turning a Context into a Step."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import sympy

from ..core.exact import xrow_dot as _x_row_dot
from ..core.numbers import round_half_up
from ..core.operations import is_identity
from ..core.steps import G_X_PATHS, STEP_BY_NAME, STEPS
from ..i18n import msg, plural
from ..rendering import latex as L
from .context import Context, _note, _title
from .exact import PRODUCTS, SCALES, _agreeing, _oriented
from .records import (
    CellDerivation,
    Line,
    Number,
    Step,
    Substitution,
    line_record,
    make_step,
    number,
    result_chain,
    work_substitutions,
    worked_chain,
)


def _product_step(ctx: Context, name: str) -> Step:
    p = PRODUCTS[name]
    if is_identity(ctx.val(p.left)) or is_identity(ctx.val(p.right)):
        return _read_off_step(ctx, name)
    out, ls, rs = ctx.sym(name), ctx.sym(p.left), ctx.sym(p.right)
    left = L.transposed(ls) if p.left_t else ls
    right = L.transposed(rs) if p.right_t else rs
    work, work_dec = [], []
    for exact, target in ((True, work), (False, work_dec)):
        lm, lr = ctx.operand(p.left, exact, p.left_t)
        rm, rr = ctx.operand(p.right, exact, p.right_t)
        target.append(("", L.APPROX if (lr or rr) else "=", f"{lm} {rm}"))
    work = _as_shown(work, work_dec)
    Lv, Rv = _oriented(ctx.val(p.left), p.left_t), _oriented(ctx.val(p.right), p.right_t)
    value = ctx.val(name)
    # the display's result from the operands as shown (decimals when some are rounded)
    subs = work_substitutions(_t(ctx.operand_numbers(p.left, False), p.left_t),
                              _t(ctx.operand_numbers(p.right, False), p.right_t), ctx.places_of(name))

    def left_term(i, k):
        return ctx.number(p.left, k, i) if p.left_t else ctx.number(p.left, i, k)

    def right_term(k, j):
        return ctx.number(p.right, j, k) if p.right_t else ctx.number(p.right, k, j)

    def derive(i: int, j: int) -> CellDerivation:
        li = f"k{L.index(i)}" if p.left_t else f"{L.index(i)}k"
        rj = f"{L.index(j)}k" if p.right_t else f"k{L.index(j)}"
        if name == "scores":
            symbolic = rf"{L.row_vector(ls, i)} \cdot {L.row_vector(rs, j)}"
        else:
            symbolic = rf"\sum_{{k}} {L.entry(ls, li)} " \
                       rf"{L.entry(rs, rj)}"
        pairs = [(left_term(i, k), right_term(k, j)) for k in range(Lv.shape[1])]
        sum_text = L.total([L.product(a.text, b.text) for a, b in pairs])
        latex, sub = worked_chain(L.cell(out, i, j), ctx.xcell(name, i, j), value[i, j], ctx.places_of(name),
                                  sum_text, "sum", pairs, symbolic)
        return _derivation(latex, None, sub)

    assert Lv.shape[1] == Rv.shape[0]
    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out, formula=f"{left} {right}",
                     exact_cells=ctx.exact_cells(name), work=work, work_decimal=work_dec, note=_note(name),
                     derive=derive, work_substitutions=subs)


def _read_off_step(ctx: Context, name: str) -> Step:
    """A product by the identity: the other factor read off, no product written (the budget counts nothing)."""
    p = PRODUCTS[name]
    ls, rs = (L.transposed(ctx.sym(f)) if t else ctx.sym(f) for f, t in ((p.left, p.left_t), (p.right, p.right_t)))
    by_right = is_identity(ctx.val(p.right))
    other, other_t, shown = (p.left, p.left_t, ls) if by_right else (p.right, p.right_t, rs)
    out, os = ctx.sym(name), ctx.sym(other)

    def derive(i: int, j: int) -> CellDerivation:
        a, b = (j, i) if other_t else (i, j)
        return CellDerivation(f"{L.cell(out, i, j)} = {L.cell(os, a, b)} = {ctx.number(other, a, b).text}", None)

    return make_step(name, _title(name), ctx.val(name), ctx.places_of(name), symbol=out,
                     formula=f"{ls} {rs} = {f'{ls} I' if by_right else f'I {rs}'} = {shown}",
                     exact_cells=ctx.exact_cells(name), note=msg("solution.read_off"), derive=derive)


def _as_shown(work: list[Line], work_dec: list[Line]) -> list[Line]:
    """The exact work, unless some operand in it is rounded (A has no short exact form): then the decimal
    work, whose product of the shown numbers the display writes before the exact result. An exact product
    line never shows rounded factors beside an exact result they do not give."""
    return work_dec if any(rel == L.APPROX for _, rel, _ in work) else work


def _t(cells: list[list[Number]], transpose: bool) -> list[list[Number]]:
    return [list(col) for col in zip(*cells)] if transpose else cells


def _derivation(latex: str, note, *subs) -> CellDerivation:
    """A cell's derivation with its substituted lines; a line from rounded numbers says so."""
    if any(s.exact_beside for s in subs):
        aside = msg("solution.cell.rounded_inputs", places=max(s.places or 0 for s in subs))
        note = aside if note is None else msg("solution.cell.note_and_rounding", note=note, rounding=aside)
    return CellDerivation(latex, note, tuple(subs))


def _scale_step(ctx: Context, name: str) -> Step:
    src = SCALES[name]
    out, ss = ctx.sym(name), ctx.sym(src)
    d_k = int(ctx.values["d_k"])
    whole = math.isqrt(d_k) ** 2 == d_k
    root = str(math.isqrt(d_k)) if whole else rf"\sqrt{{{d_k}}}"
    work, work_dec = [(r"\sqrt{d_k}", "=", L.sqrt_dk(d_k))], [(r"\sqrt{d_k}", "=", L.sqrt_dk(d_k))]
    if not whole:
        work_dec[0] = (r"\sqrt{d_k}", L.APPROX, L.decimal(math.sqrt(d_k), L.EXP_PLACES))
    for exact, target in ((True, work), (False, work_dec)):
        m, rounded = ctx.operand(src, exact)
        target.append((out, L.APPROX if rounded else "=", rf"{L.frac('1', root)} {m}"))
    value = ctx.val(name)

    root_number = number(root, sympy.sqrt(d_k))
    shown = ctx.operand_numbers(src, False)
    subs = [line_record("quotient", [[m], [root_number]], ctx.places_of(name)) for row in shown for m in row]

    def derive(i: int, j: int) -> CellDerivation:
        num = ctx.number(src, i, j)
        latex, sub = worked_chain(L.cell(out, i, j), ctx.xcell(name, i, j), value[i, j], ctx.places_of(name),
                                  L.frac(num.text, root), "quotient", [[num], [root_number]],
                                  L.frac(L.cell(ss, i, j), r"\sqrt{d_k}"))
        return _derivation(latex, None, sub)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     formula=L.frac(ss, r"\sqrt{d_k}"), exact_cells=ctx.exact_cells(name), work=work,
                     work_decimal=work_dec, note=_note(name), derive=derive, work_substitutions=subs)


def _mask_step(ctx: Context, name: str) -> Step:
    zs, ms = ctx.sym("scaled"), ctx.sym(name)
    value = ctx.val(name)
    if ctx.causal:
        formula = (rf"\begin{{cases}} {L.entry(zs, 'ij')} & j \le i \\ "
                   r"-\infty & j > i \end{cases}")
        lhs = L.entry(ms, 'ij')
    else:
        formula, lhs = zs, ms

    def derive(i: int, j: int) -> CellDerivation:
        here = L.cell(ms, i, j)
        if ctx.causal and j > i:
            return CellDerivation(rf"{here} = -\infty \quad (j = {j + 1} > i = {i + 1})",
                                  msg("solution.cell.masked", column=j + 1, query=i + 1))
        text, _ = ctx.term("scaled", i, j)
        why = rf" \quad (j = {j + 1} \le i = {i + 1})" if ctx.causal else ""
        return CellDerivation(f"{here} = {L.cell(zs, i, j)} = {text}{why}",
                              msg("solution.cell.visible", column=j + 1, query=i + 1) if ctx.causal else None)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=ms, lhs=lhs, formula=formula,
                     exact_cells=ctx.exact_cells(name), note=_note(name) if ctx.causal else None, derive=derive)


def _softmax_step(ctx: Context, name: str) -> Step:
    src = STEP_BY_NAME["A"].inputs[0]  # "masked" (equal to the scaled scores without a mask)
    zs, out = ctx.sym(src), ctx.sym(name)
    z, value = ctx.val(src), ctx.val(name)
    rows, cols = z.shape
    visible = np.isfinite(z)  # (n, n)
    with np.errstate(over="ignore"):
        e = np.where(visible, np.exp(np.where(visible, z, 0.0)), 0.0)  # (n, n) shown only, e^{-inf} = 0
    sums = e.sum(axis=1)  # (n,)
    exponent = [[ctx.term(src, i, j) for j in range(cols)] for i in range(rows)]
    rounded_exp = any(r for row in exponent for _, r in row)
    e_text = [[L.exp_of(exponent[i][j][0]) if visible[i, j] else "0" for j in range(cols)] for i in range(rows)]
    e_dec = [[L.decimal(e[i, j], L.EXP_PLACES) if visible[i, j] else "0" for j in range(cols)] for i in range(rows)]
    denominators = [L.total([e_text[i][k] for k in range(cols) if visible[i, k]]) for i in range(rows)]
    sums_dec = L.bmatrix([[L.decimal(s, L.EXP_PLACES)] for s in sums])

    exact_cells: list[list[str | None]] = []
    for i in range(rows):
        row: list[str | None] = []
        for j in range(cols):
            rational = ctx.xcell(name, i, j)
            if rational is not None:
                row.append(rational)
            elif visible[i, j] and not any(exponent[i][k][1] for k in range(cols)) and len(denominators[i]) <= 90:
                row.append(L.frac(e_text[i][j], denominators[i]))
            else:
                row.append(None)
        exact_cells.append(row)

    e_sym = L.exp_of(zs)
    sum_sym = rf"\sum_{{k}} {L.exp_of(L.entry(zs, 'ik'))}"
    work = [(e_sym, L.APPROX if rounded_exp else "=", L.bmatrix(e_text)), ("", L.APPROX, L.bmatrix(e_dec)),
            (sum_sym, L.APPROX, sums_dec)]
    work_dec = [(e_sym, L.APPROX, L.bmatrix(e_dec)), (sum_sym, L.APPROX, sums_dec)]

    def derive(i: int, j: int) -> CellDerivation:
        here = L.cell(out, i, j)
        symbolic = L.frac(L.exp_of(L.cell(zs, i, j)), rf"\sum_{{k}} {L.exp_of(L.entry(zs, L.index(i) + 'k'))}")
        places = ctx.places_of(name)
        decimal = L.decimal(value[i, j], places)
        if not visible[i, j]:
            total_text = L.decimal(sums[i], L.EXP_PLACES)
            latex = L.chain(here, symbolic, L.frac(L.exp_of(r"-\infty"), denominators[i] or "0"),
                            L.frac("0", total_text), "0")
            zero = Substitution("quotient", ((number("0"),), (number(total_text),)), "0", None)
            return CellDerivation(latex, msg("solution.cell.masked_weight", column=j + 1, query=i + 1), (zero,))
        row_rounded = any(exponent[i][k][1] for k in range(cols) if visible[i, k])
        numbers = L.frac(e_dec[i][j], L.total([e_dec[i][k] for k in range(cols) if visible[i, k]]))
        exact_form = L.frac(e_text[i][j], denominators[i])
        middle: list[str | tuple[str, str]] = [symbolic, (L.APPROX if row_rounded else "=", exact_form)]
        rational = ctx.xcell(name, i, j)
        note = msg("solution.cell.softmax_masked_row" if not visible[i].all() else "solution.cell.softmax_row",
                   row=i + 1)
        if rational is not None:
            return CellDerivation(result_chain(here, rational, decimal, value[i, j], False, *middle), note)
        shown = [[_e_number(e_dec[i][j], e[i, j])], [_e_number(e_dec[i][k], e[i, k]) for k in range(cols)
                                                    if visible[i, k]]]
        latex, sub = worked_chain(here, None, value[i, j], places, numbers, "quotient", shown, *middle)
        return _derivation(latex, note, sub)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     lhs=L.entry(out, 'ij'),
                     formula=L.frac(L.exp_of(L.entry(zs, 'ij')), sum_sym),
                     exact_cells=exact_cells, work=work, work_decimal=work_dec, note=_note(name), derive=derive)


def _e_number(text: str, value: float) -> Number:
    """e^x as the eˣ table shows it (EXP_PLACES decimals): rounded unless those digits hold it."""
    return number(text, None, not L.is_exact_decimal(text, value))


def _softmax_backward_step(ctx: Context, name: str) -> Step:
    out, As, Gs = ctx.sym(name), ctx.sym("A"), ctx.sym("G_A")
    A, G, value = ctx.val("A"), ctx.val("G_A"), ctx.val(name)
    rows, cols = A.shape
    r = np.sum(A * G, axis=1)  # (n,) rowsum(A ⊙ G_A), shown only
    Ax, Gx = ctx.exact.get("A"), ctx.exact.get("G_A")
    r_exact = [None] * rows
    if isinstance(Ax, np.ndarray) and isinstance(Gx, np.ndarray):
        r_exact = [L.short(_agreeing(np.array([[_x_row_dot(Ax, Gx, i)]], dtype=object), r[i:i + 1, None])[0, 0])
                   for i in range(rows)]
    r_places = _r_places(A, G, r, value, ctx.places_of(name), max(ctx.places_of(name), ctx.places_of("A")))
    r_dec = [L.decimal(x, r_places) for x in r]
    r_sum = rf"\sum_{{k}} {L.entry(As, 'ik')} {L.entry(Gs, 'ik')}"
    if all(x is not None for x in r_exact):
        r_line = ("r", "=", L.bmatrix([[x] for x in r_exact]))
    else:
        r_line = ("r", L.APPROX, L.bmatrix([[d] for d in r_dec]))
    r_dec_exact = all(L.is_exact_decimal(d, x) for d, x in zip(r_dec, r))
    work = [("r_{i}", "=", r_sum), r_line]
    work_dec = [("r_{i}", "=", r_sum), ("r", "=" if r_dec_exact else L.APPROX, L.bmatrix([[d] for d in r_dec]))]
    masked = np.triu(np.ones((rows, cols), dtype=bool), k=1) if ctx.causal else np.zeros((rows, cols), dtype=bool)

    def derive(i: int, j: int) -> CellDerivation:
        here = L.cell(out, i, j)
        if masked[i, j]:
            return CellDerivation(rf"{here} = 0", msg("solution.cell.masked_gradient", column=j + 1, query=i + 1))
        # line 1: the row's weighted average r_i; line 2: this cell
        terms = [(ctx.number("A", i, k), ctx.number("G_A", i, k)) for k in range(cols)]
        row = L.index(i)
        r_chain, r_sub = worked_chain(f"r_{{{row}}}", r_exact[i], r[i], r_places,
                                      L.total([L.product(a.text, g.text) for a, g in terms]), "sum", terms,
                                      rf"\sum_{{k}} {L.entry(As, row + 'k')} {L.entry(Gs, row + 'k')}")
        if r_sub.rounded:  # carry r as this line wrote it
            r_number = number(r_sub.result, None, True)
        elif r_exact[i] is not None:
            r_number = number(r_exact[i], r[i])
        else:
            r_number = number(r_dec[i], None, not L.is_exact_decimal(r_dec[i], r[i]))
        a, g = ctx.number("A", i, j), ctx.number("G_A", i, j)
        symbolic = rf"{L.cell(As, i, j)} \left({L.cell(Gs, i, j)} - r_{{{row}}}\right)"
        numbers = rf"{L.paren(a.text)} \cdot \left({g.text} - {L.paren(r_number.text)}\right)"
        cell_chain, cell_sub = worked_chain(here, ctx.xcell(name, i, j), value[i, j], ctx.places_of(name), numbers,
                                            "times_difference", [[a], [g, r_number]], symbolic)
        return _derivation(L.aligned([_split(r_chain), _split(cell_chain)]), None, r_sub, cell_sub)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     formula=rf"{As} \odot \left({Gs} - r \mathbf{{1}}^{{\top}}\right)",
                     exact_cells=ctx.exact_cells(name), work=work, work_decimal=work_dec, note=_note(name),
                     derive=derive)


def _r_places(A: np.ndarray, G_A: np.ndarray, r: np.ndarray, value: np.ndarray, places: int, start: int) -> int:
    """The places to show r to (from `start`, at most 4) so that G_Z = A ⊙ (G_A − r) to `places` follows from
    the r shown: 2/3 · (4 − 3.33) gives 0.45, not G_Z's 0.44, but 2/3 · (4 − 3.333) does."""
    target = round_half_up(value, places)
    for p in range(start, 5):
        if np.array_equal(round_half_up(A * (G_A - round_half_up(r, p)[:, None]), places), target):
            return p
    return 4


def _split(chain_text: str) -> Line:
    """'a = b = c' → ('a', '=', 'b = c') for an aligned block."""
    lhs, _, rest = chain_text.partition(" = ")
    return lhs, "=", rest


def _g_x_step(ctx: Context, name: str) -> Step:
    out = ctx.sym(name)
    value = ctx.val(name)
    formula = " + ".join(f"{ctx.sym(g)} {L.transposed(ctx.sym(w))}" for g, w in G_X_PATHS)
    work, work_dec = [], []
    for exact, target in ((True, work), (False, work_dec)):
        pieces, rounded = [], False
        for g, w in G_X_PATHS:
            gm, gr = ctx.operand(g, exact)
            wm, wr = ctx.operand(w, exact, transpose=True)
            pieces.append(f"{gm} {wm}")
            rounded = rounded or gr or wr
        target.append(("", L.APPROX if rounded else "=", " + ".join(pieces)))
    work = _as_shown(work, work_dec)
    shown = [(ctx.operand_numbers(g, False), ctx.operand_numbers(w, False)) for g, w in G_X_PATHS]
    rows, cols = value.shape
    subs = [line_record("sum", [(G[i][k], W[j][k]) for G, W in shown for k in range(len(G[i]))],
                        ctx.places_of(name)) for i in range(rows) for j in range(cols)]

    def derive(i: int, j: int) -> CellDerivation:
        groups, pairs = [], []
        for g, w in G_X_PATHS:
            width = ctx.val(g).shape[1]
            these = [(ctx.number(g, i, k), ctx.number(w, j, k)) for k in range(width)]
            pairs += these
            groups.append(r"\left(" + L.total([L.product(a.text, b.text) for a, b in these]) + r"\right)")
        symbolic = " + ".join(rf"\sum_{{k}} {L.entry(ctx.sym(g), L.index(i) + 'k')} "
                              rf"{L.entry(ctx.sym(w), L.index(j) + 'k')}"
                              for g, w in G_X_PATHS)
        latex, sub = worked_chain(L.cell(out, i, j), ctx.xcell(name, i, j), value[i, j], ctx.places_of(name),
                                  " + ".join(groups), "sum", pairs, symbolic)
        return _derivation(latex, None, sub)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out, formula=formula,
                     exact_cells=ctx.exact_cells(name), work=work, work_decimal=work_dec, note=_note(name),
                     derive=derive, work_substitutions=subs)


def _token_list(ids: np.ndarray) -> str:
    return r"\left(" + ", ".join(str(int(t)) for t in ids) + r"\right)"


def _embedding_step(ctx: Context, name: str) -> Step:
    ids = np.asarray(ctx.values["token_ids"], dtype=int)  # (n,)
    out, es = ctx.sym(name), ctx.sym("E")
    value = ctx.val(name)
    work = [("t", "=", _token_list(ids))]

    def derive(i: int, j: int) -> CellDerivation:
        text, _ = ctx.term("E", int(ids[i]), j)
        return CellDerivation(rf"{L.cell(out, i, j)} = {es}[t_{{{L.index(i)}}}]_{{{L.index(j)}}} = "
                              rf"{es}[{int(ids[i])}]_{{{L.index(j)}}} = {text}",
                              msg("solution.cell.embedding_lookup", position=i + 1, token=int(ids[i])))

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     lhs=rf"{out.lower()}_{{i}}", formula=rf"{es}[t_{{i}}]",
                     exact_cells=ctx.exact_cells(name), work=work, note=_note(name), derive=derive)


def _embedding_grad_step(ctx: Context, name: str) -> Step:
    ids = np.asarray(ctx.values["token_ids"], dtype=int)  # (n,)
    out, gx = ctx.sym(name), ctx.sym("G_X")
    value = ctx.val(name)
    work = [("t", "=", _token_list(ids))]

    def derive(v: int, j: int) -> CellDerivation:
        positions = [p for p, tok in enumerate(ids) if tok == v]
        here = rf"{out}[{v}]_{{{L.index(j)}}}"
        symbolic = rf"\sum_{{p:\, t_p = {v}}} {L.entry(gx, 'p' + L.index(j))}"
        if not positions:
            return CellDerivation(f"{here} = {symbolic} = 0", msg("solution.cell.embedding_unused", token=v))
        named = " + ".join(L.cell(gx, p, j) for p in positions)
        terms = [ctx.number("G_X", p, j) for p in positions]
        latex, sub = worked_chain(here, ctx.xcell(name, v, j), value[v, j], ctx.places_of(name),
                                  L.total([t.text for t in terms]), "sum", [[t] for t in terms], symbolic, named)
        return _derivation(latex, plural("solution.cell.embedding_accumulate", len(positions), token=v), sub)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     lhs=rf"{out}[v]", formula=rf"\sum_{{p:\, t_p = v}} ({gx})_{{p}}",
                     exact_cells=ctx.exact_cells(name), work=work, note=_note(name), derive=derive)


def _value_step(ctx: Context, name: str) -> Step:
    """A step this module has no formula for (added to the pipeline later): its result, exact where short."""
    return make_step(name, msg("solution.step.generic", part=msg(f"part.{name}")), ctx.val(name),
                     ctx.places_of(name), symbol=ctx.sym(name), exact_cells=ctx.exact_cells(name))


# the builder each registry step names (AttentionStep.builder)
BY_KIND: dict[str, Callable[[Context, str], Step]] = {
    "product": _product_step, "scale": _scale_step, "mask": _mask_step, "softmax": _softmax_step,
    "softmax_backward": _softmax_backward_step, "g_x": _g_x_step, "embedding": _embedding_step,
    "embedding_grad": _embedding_grad_step,
    "value": _value_step,  # a step whose kinds bring their own worked solution (M, G_O)
}
BUILDERS: dict[str, Callable[[Context, str], Step]] = {s.name: BY_KIND[s.builder] for s in STEPS}
