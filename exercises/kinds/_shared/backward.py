"""Derivation steps for the backward kinds' own solve(ex): the chain rule for one cell, the softmax
Jacobian of one row, where 1/√d_k comes from, and a finite-difference check of one cell.

Each builder returns an exercises.solutions.Step named outside the pipeline (``chain_G_A``,
``jacobian``, ``check`` …), so it never stands in for a part; its numbers are the exercise's
reference values. The check runs attention_core's forward functions twice around one entry.
Imported lazily by the kinds (it pulls in sympy through exercises.rendering.latex).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import sympy

from ... import solutions
from ...core import pipeline
from ...core.model import Exercise
from ...i18n import Msg, msg
from ...rendering import latex as L

H = 1e-3  # the finite-difference step
H_LATEX = "10^{-3}"
LOSS_PLACES = 8  # the two loss values of the check: enough digits that their difference / 2h is exact to 1e-5
FD_PLACES = 6
DOT = r"\cdot"  # a whole row: (G_Z)_{3\cdot}
ROOT_DK = r"\sqrt{d_k}"


# ---------------------------------------------------------------- numbers and symbols


def _small_fraction(x: float) -> Fraction | None:
    f = Fraction(x).limit_denominator(1000)
    return f if abs(float(f) - x) < 1e-12 * max(1.0, abs(x)) else None


def exact_text(x: float) -> tuple[str, bool]:
    """x exactly when it is a fraction with a small denominator (\\frac{5}{24}) or such a fraction
    times √2 (what a division by √2 leaves), else 4 decimals; and whether the text is rounded."""
    x = float(x)
    f = _small_fraction(x)
    if f is not None:
        return L.rational(sympy.Rational(f.numerator, f.denominator)), False
    f = _small_fraction(x / math.sqrt(2))
    if f is not None:
        return L.sym(sympy.Rational(f.numerator, f.denominator) * sympy.sqrt(2)), False
    text = L.decimal(x, 4)
    return text, not L.is_exact_decimal(text, x)


def shown_places(value: float, places: int) -> int:
    """A whole number is shown whole; anything else to the part's places."""
    return 0 if float(value).is_integer() else places


def loss_text(x: float) -> tuple[str, str]:
    """(relation, text) of a loss value: exact when a few decimals hold it, else ≈ 8 places."""
    text = L.decimal(x, LOSS_PLACES)
    rel = "=" if L.is_exact_decimal(text, x) else L.APPROX
    return rel, (text.rstrip("0").rstrip(".") if "." in text else text)


def partial(of: str, by: str) -> str:
    """∂of/∂by as a fraction."""
    return L.frac(rf"\partial {of}", rf"\partial {by}")


def at(name: str, i: int | str, j: int | str) -> str:
    """A cell of a named value, 1-based; a letter index stays a letter: at("O", 2, "c") → O_{3c}."""
    first = L.index(i) if isinstance(i, int) else i
    second = L.index(j) if isinstance(j, int) else j
    return L.entry(L.symbol(name), f"{first}{second}")


def values_of(ex: Exercise) -> dict[str, Any]:
    """Every value of the exercise: the pipeline's, with the parts' own references on top."""
    return {**pipeline.run(ex.given), **{p.name: p.reference for p in ex.parts}}


def places_of(ex: Exercise, name: str) -> int:
    return next((p.decimals for p in ex.parts if p.name == name), 2)


def largest(M: np.ndarray, rows: Sequence[int] | None = None) -> tuple[int, int]:
    """The cell with the largest magnitude (the first such, in the given rows): a cell worth checking."""
    M = np.atleast_2d(np.asarray(M, dtype=float))
    best, where = -1.0, (0, 0)
    for i in rows if rows is not None else range(M.shape[0]):
        for j in range(M.shape[1]):
            if abs(M[i, j]) > best + 1e-12:
                best, where = abs(M[i, j]), (i, j)
    return where


# ---------------------------------------------------------------- the chain rule for one cell


@dataclass(frozen=True)
class Path:
    """One way a variable reaches the loss: through `output`, whose gradient is `grad`, with local
    derivative `local` (∂output/∂variable)."""

    output: str  # LaTeX of the output cell: O_{31}
    grad: str  # LaTeX of its gradient: (G_O)_{31}
    grad_value: float
    local: str  # LaTeX of ∂output/∂variable: V_{21}
    local_value: float


def _as_worked(sub: solutions.Substitution, value: float, places: int) -> solutions.Substitution:
    """The record of the matrix work's last line, which shows the decimal to `places` (the cell's own
    derivation may show the exact value instead)."""
    return dataclasses.replace(sub, result=L.decimal(value, places), places=places)


def shown_number(x: float) -> solutions.Number:
    """x as exact_text shows it, with the value that text stands for."""
    text, rounded = exact_text(x)
    return solutions.number(text, float(x), rounded)


def _products(paths: Sequence[Path]) -> tuple[str, str, list[tuple[solutions.Number, ...]]]:
    """(named, numbers, terms): Σ grad · local in symbols, in numbers (a local factor 1 left out), and
    those numbers as data."""
    named, numbers, terms = [], [], []
    for p in paths:
        g, c = shown_number(p.grad_value), shown_number(p.local_value)
        named.append(p.grad if p.local == "1" else f"{p.grad} {p.local}")
        numbers.append(g.text if p.local == "1" else L.product(g.text, c.text))
        terms.append((g,) if p.local == "1" else (g, c))
    return L.total(named), L.total(numbers), terms


def chain_rule_step(name: str, title: Msg, note: Msg | None, variable: str, forward: Sequence[L.Line],
                    paths: Sequence[Path], value: float, places: int,
                    groups: Sequence[tuple[str, Sequence[Path]]] | None = None) -> solutions.Step:
    """∂L/∂variable = Σ over its paths of ∂L/∂output · ∂output/∂variable, written out for one cell.
    `groups`: (output with its summed index, e.g. Q_{3c}; its paths), each written as one Σ_c."""
    lhs = partial("L", variable)
    if groups is None:
        symbolic = " + ".join(f"{partial('L', p.output)} {partial(p.output, variable)}" for p in paths)
        named, numbers, terms = _products(paths)
    else:
        symbolic = " + ".join(rf"\sum_{{c}} {partial('L', out)} {partial(out, variable)}" for out, _ in groups)
        parts = [_products(g) for _, g in groups]
        named = " + ".join(rf"\left({n}\right)" for n, _, _ in parts)
        numbers = " + ".join(rf"\left({m}\right)" for _, m, _ in parts)
        terms = [t for _, _, ts in parts for t in ts]
    rounded = any(n.rounded for t in terms for n in t)
    rel = L.APPROX if rounded else "="
    work = [*forward, (lhs, "=", symbolic), ("", "=", named), ("", rel, numbers)]
    exact, _ = exact_text(value)
    places = shown_places(value, places)
    latex, sub = solutions.worked_chain(lhs, exact, value, places, numbers, "sum", terms, named)

    def derive(i: int, j: int) -> solutions.CellDerivation:
        return solutions.CellDerivation(latex, note, (sub,))

    return solutions.make_step(name, title, np.array([[value]]), places, symbol=lhs, lhs=lhs, formula="",
                               exact_cells=[[exact]], work=work, note=note, derive=derive,
                               work_substitutions=[_as_worked(sub, value, places)])


def _sum_line(out: str, terms: str, variable: str, local: str) -> L.Line:
    """out = Σ …  ⇒  ∂out/∂variable = local: where the variable enters the forward pass."""
    return out, "=", rf"{terms} \quad \Rightarrow \quad {partial(out, variable)} = {local}"


def chain_weights(values: Mapping[str, Any], i: int, j: int, places: int) -> solutions.Step:
    """(G_A)_ij: weight a_ij enters O_ic for every column c (O = A V)."""
    d_v = values["V"].shape[1]
    variable = at("A", i, j)
    forward = [_sum_line(at("O", i, "c"), rf"\sum_{{k}} {at('A', i, 'k')} {at('V', 'k', 'c')}", variable,
                         at("V", j, "c"))]
    paths = [Path(at("O", i, c), at("G_O", i, c), values["G_O"][i, c], at("V", j, c), values["V"][j, c])
             for c in range(d_v)]
    return chain_rule_step("chain_G_A", title("chain_G_A", **cell_params(i, j)),
                           title("note_chain_G_A", paths=d_v, **cell_params(i, j)), variable, forward, paths,
                           values["G_A"][i, j], places)


def chain_values(values: Mapping[str, Any], k: int, c: int, places: int) -> solutions.Step:
    """(G_V)_kc: value V_kc enters O_ic of every row i, through weight a_ik."""
    n = values["A"].shape[0]
    variable = at("V", k, c)
    forward = [_sum_line(at("O", "i", c), rf"\sum_{{m}} {at('A', 'i', 'm')} {at('V', 'm', c)}", variable,
                         at("A", "i", k))]
    paths = [Path(at("O", i, c), at("G_O", i, c), values["G_O"][i, c], at("A", i, k), values["A"][i, k])
             for i in range(n)]
    return chain_rule_step("chain_G_V", title("chain_G_V", **cell_params(k, c)),
                           title("note_chain_G_V", paths=n, **cell_params(k, c)), variable, forward, paths,
                           values["G_V"][k, c], places)


def chain_queries(values: Mapping[str, Any], i: int, c: int, places: int) -> solutions.Step:
    """(G_Q)_ic: Q_ic enters S_ik for every key k (S = Q Kᵀ)."""
    n = values["K"].shape[0]
    variable = at("Q", i, c)
    forward = [_sum_line(at("scores", i, "k"), rf"\sum_{{m}} {at('Q', i, 'm')} {at('K', 'k', 'm')}", variable,
                         at("K", "k", c))]
    paths = [Path(at("scores", i, k), at("G_scores", i, k), values["G_scores"][i, k], at("K", k, c),
                  values["K"][k, c]) for k in range(n)]
    return chain_rule_step("chain_G_Q", title("chain_G_Q", **cell_params(i, c)),
                           title("note_chain_G_Q", **cell_params(i, c)), variable, forward, paths,
                           values["G_Q"][i, c], places)


def chain_keys(values: Mapping[str, Any], j: int, c: int, places: int) -> solutions.Step:
    """(G_K)_jc: K_jc enters S_ij for every query i, down column j of the scores."""
    n = values["Q"].shape[0]
    variable = at("K", j, c)
    forward = [_sum_line(at("scores", "i", j), rf"\sum_{{m}} {at('Q', 'i', 'm')} {at('K', j, 'm')}", variable,
                         at("Q", "i", c))]
    paths = [Path(at("scores", i, j), at("G_scores", i, j), values["G_scores"][i, j], at("Q", i, c),
                  values["Q"][i, c]) for i in range(n)]
    return chain_rule_step("chain_G_K", title("chain_G_K", **cell_params(j, c)),
                           title("note_chain_G_K", **cell_params(j, c)), variable, forward, paths,
                           values["G_K"][j, c], places)


def chain_weight_matrix(values: Mapping[str, Any], m: str, a: int, c: int, places: int) -> solutions.Step:
    """(G_W_m)_ac: W_m[a, c] enters row i of the projection m = X W_m for every token i: why Xᵀ."""
    n = values["X"].shape[0]
    W, G = f"W_{m}", f"G_{m}"
    variable = at(W, a, c)
    forward = [_sum_line(at(m, "i", c), rf"\sum_{{b}} {at('X', 'i', 'b')} {at(W, 'b', c)}", variable,
                         at("X", "i", a))]
    paths = [Path(at(m, i, c), at(G, i, c), values[G][i, c], at("X", i, a), values["X"][i, a]) for i in range(n)]
    return chain_rule_step(f"chain_G_W_{m}", title("chain_G_W", matrix=W, **cell_params(a, c)),
                           title("note_chain_G_W", matrix=W, grad=G, **cell_params(a, c)), variable, forward,
                           paths, values[f"G_W_{m}"][a, c], places)


def chain_inputs(values: Mapping[str, Any], i: int, a: int, places: int, via: Sequence[str] = ("Q", "K", "V"),
                 name: str = "G_X") -> solutions.Step:
    """(G_X)_ia: X_ia enters row i of every projection m = X W_m (m in `via`), once per column."""
    variable = at("X", i, a)
    forward, paths = [], []
    for m in via:
        W, G = f"W_{m}", f"G_{m}"
        forward.append(_sum_line(at(m, i, "c"), rf"\sum_{{b}} {at('X', i, 'b')} {at(W, 'b', 'c')}", variable,
                                 at(W, a, "c")))
        paths += [Path(at(m, i, c), at(G, i, c), values[G][i, c], at(W, a, c), values[W][a, c])
                  for c in range(values[W].shape[1])]
    key = "chain_G_X" if len(via) > 1 else "chain_G_X_V"
    groups = None
    if len(via) > 1:  # one Σ_c per projection: Q_{ic}, K_{ic}, V_{ic}
        widths = [values[f"W_{m}"].shape[1] for m in via]
        starts = np.cumsum([0, *widths])
        groups = [(at(m, i, "c"), paths[starts[k]:starts[k + 1]]) for k, m in enumerate(via)]
    return chain_rule_step(f"chain_{name}", title(key, **cell_params(i, a)),
                           title(f"note_{key}", paths=len(paths), **cell_params(i, a)), variable, forward, paths,
                           values[name][i, a], places, groups)


def chain_embedding(values: Mapping[str, Any], token: int, c: int, places: int) -> solutions.Step:
    """G_E[t]_c: row t of E is copied into every position p holding token t."""
    ids = [int(t) for t in np.asarray(values["token_ids"]).ravel()]
    variable = rf"E[{token}]_{{{L.index(c)}}}"
    forward = [_sum_line(at("X", "p", c), rf"E[t_p]_{{{L.index(c)}}}", variable,
                         rf"\begin{{cases}} 1 & t_p = {token} \\ 0 & t_p \ne {token} \end{{cases}}")]
    paths = [Path(at("X", p, c), at("G_X", p, c), values["G_X"][p, c], "1", 1.0)
             for p, t in enumerate(ids) if t == token]
    return chain_rule_step("chain_G_E", title("chain_G_E", token=token, col=c + 1),
                           title("note_chain_G_E", token=token, count=len(paths)), variable, forward, paths,
                           values["G_E"][token, c], places)


# ---------------------------------------------------------------- the softmax Jacobian of one row


def jacobian_step(name: str, title: Msg, note: Msg, values: Mapping[str, Any], i: int, places: int) -> solutions.Step:
    """Row i of G_Z as G_A's row times the Jacobian J = diag(a) − a aᵀ of that row's softmax."""
    a = np.asarray(values["A"], dtype=float)[i]  # (n,)
    g = np.asarray(values["G_A"], dtype=float)[i]  # (n,)
    J = np.diag(a) - np.outer(a, a)  # (n, n), symmetric: ∂a_j/∂z_k = a_j (δ_jk − a_k)
    row = np.asarray(values["G_scaled"], dtype=float)[i]  # (n,)
    As, GA, GZ = L.symbol("A"), L.symbol("G_A"), L.symbol("G_scaled")
    a_vec, J_sym = L.row_vector(As, i), f"J^{{({L.index(i)})}}"
    J_cells = [[exact_text(x)[0] for x in r] for r in J]
    lhs = L.entry(GZ, L.index(i) + DOT)
    work = [
        (partial(L.entry(As, L.index(i) + "j"), L.entry("Z", L.index(i) + "k")), "=",
         rf"{L.entry(As, L.index(i) + 'j')} \left(\delta_{{jk}} - {L.entry(As, L.index(i) + 'k')}\right)"),
        (a_vec, "=", L.bmatrix([[L.number(x) for x in a]])),
        (J_sym, "=", rf"\operatorname{{diag}}({a_vec}) - {a_vec}^{{\top}} {a_vec} = {L.bmatrix(J_cells)}"),
        (lhs, "=", rf"{L.entry(GA, L.index(i) + DOT)} \, {J_sym}"),
        ("", "=", f"{L.bmatrix([[L.number(x) for x in g]])} {L.bmatrix(J_cells)}"),
    ]
    cells = [exact_text(x) for x in row]

    def derive(_: int, k: int) -> solutions.CellDerivation:
        terms = [(_given_number(g[m]), shown_number(J[m, k])) for m in range(len(a))]
        symbolic = rf"\sum_{{m}} {L.entry(GA, L.index(i) + 'm')} J^{{({L.index(i)})}}_{{m{L.index(k)}}}"
        latex, sub = solutions.worked_chain(L.cell(GZ, i, k), cells[k][0], row[k], places,
                                            L.total([L.product(x.text, y.text) for x, y in terms]), "sum", terms,
                                            symbolic)
        return solutions.CellDerivation(latex, note, (sub,))

    return solutions.make_step(name, title, row[None, :], places, symbol=lhs, lhs=lhs, formula="",
                               exact_cells=[[c for c, _ in cells]], work=work, note=note, derive=derive)


def _given_number(x: float) -> solutions.Number:
    """A given number as L.number shows it (exactly, or its own digits)."""
    text = L.number(x)
    try:
        rounded = float(text) != float(x)
    except ValueError:
        rounded = False
    return solutions.number(text, float(x), rounded)


# ---------------------------------------------------------------- where 1/√d_k comes from


def scale_step(name: str, title: Msg, note: Msg, values: Mapping[str, Any], i: int, j: int,
               places: int) -> solutions.Step:
    """(G_S)_ij = (G_Z)_ij · ∂Z_ij/∂S_ij = (G_Z)_ij / √d_k for one cell."""
    d_k = int(values["d_k"])
    root_whole = math.isqrt(d_k) ** 2 == d_k
    root = str(math.isqrt(d_k)) if root_whole else rf"\sqrt{{{d_k}}}"
    Z, S = at("scaled", i, j), at("scores", i, j)
    GZ, GS = at("G_scaled", i, j), at("G_scores", i, j)
    g = float(values["G_scaled"][i, j])
    value = float(values["G_scores"][i, j])
    places = shown_places(value, places)
    g_number = shown_number(g)
    g_text, g_rounded = g_number.text, g_number.rounded
    # a fraction over the root reads better as a product than as a fraction inside a fraction
    quotient = rf"{L.paren(g_text)} \cdot {L.frac('1', root)}" if "frac" in g_text else L.frac(g_text, root)
    lhs = partial("L", S)
    work = [(Z, "=", rf"{L.frac(S, ROOT_DK)} \quad \Rightarrow \quad {partial(Z, S)} = "
                     rf"{L.frac('1', ROOT_DK)} = {L.frac('1', root)}"),
            (lhs, "=", rf"{partial('L', Z)} \, {partial(Z, S)} = {L.frac(GZ, ROOT_DK)}"),
            ("", L.APPROX if g_rounded else "=", quotient)]
    exact = exact_text(value)[0] if root_whole else L.short(sympy.nsimplify(g) / sympy.sqrt(d_k))
    latex, sub = solutions.worked_chain(GS, exact, value, places, quotient, "quotient",
                                        [[g_number], [solutions.number(root, sympy.sqrt(d_k))]],
                                        L.frac(GZ, ROOT_DK))

    def derive(_: int, __: int) -> solutions.CellDerivation:
        return solutions.CellDerivation(latex, note, (sub,))

    return solutions.make_step(name, title, np.array([[value]]), places, symbol=GS, lhs=lhs, formula="",
                               exact_cells=[[exact]], work=work, note=note, derive=derive,
                               work_substitutions=[_as_worked(sub, value, places)])


# ---------------------------------------------------------------- the finite-difference check


def check_step(title: Msg, note: Msg, loss: Callable[[dict[str, np.ndarray]], float], loss_latex: str,
               point: Mapping[str, np.ndarray], name: str, cell: tuple[int, int], variable: str,
               analytic_symbol: str, analytic: float, places: int, extra: Sequence[L.Line] = ()) -> solutions.Step:
    """A central difference (L(x + h) − L(x − h)) / 2h of one entry against its analytic gradient."""
    base = {k: np.array(v, dtype=float) for k, v in point.items()}
    sides = []
    for sign in (1.0, -1.0):
        moved = {**base, name: base[name].copy()}
        moved[name][cell] += sign * H
        sides.append(loss(moved))
    (plus_rel, plus), (minus_rel, minus) = (loss_text(s) for s in sides)
    two_h = L.decimal(2 * H, 3)
    # the slope from the losses as shown (what a reader recomputes), to FD_PLACES
    fd = solutions.Substitution("difference_quotient", ((solutions.number(plus, None, plus_rel != "="),
                                                         solutions.number(minus, None, minus_rel != "=")),
                                                        (solutions.number(two_h),)),
                                "", FD_PLACES, True)
    shown = fd.computed()
    fd = replace(fd, result=L.decimal(float(shown), FD_PLACES))
    difference = float(shown)
    gap = abs(difference - analytic)
    bound = 9 if gap < 1e-9 else max(0, math.floor(-math.log10(gap)))
    quotient = L.frac(rf"L({variable} + h) - L({variable} - h)", "2h")
    numbers = L.frac(f"{plus} - {L.paren(minus)}", two_h)
    slope = f"{numbers} {'=' if Fraction(fd.result) == shown else L.APPROX} {fd.result}"
    work = [("L", "=", loss_latex), *extra, ("h", "=", H_LATEX),
            (rf"L({variable} + h)", plus_rel, plus), (rf"L({variable} - h)", minus_rel, minus),
            (quotient, L.APPROX, slope),
            (rf"\left| {quotient} - {analytic_symbol} \right|", "<", f"10^{{-{bound}}}")]
    exact, _ = exact_text(analytic)
    places = shown_places(analytic, places)
    decimal = L.decimal(analytic, places)

    def derive(_: int, __: int) -> solutions.CellDerivation:
        if float(fd.result) == analytic:  # the slope's digits are the gradient: one chain
            latex = solutions.result_chain(analytic_symbol, exact, decimal, analytic, False, (L.APPROX, slope))
        else:  # they only approximate it: ≈, never "0.444444 = 4/9"
            latex = (L.chain(analytic_symbol, (L.APPROX, slope)) + r" \quad "
                     + solutions.result_chain(analytic_symbol, exact, decimal, analytic))
        return solutions.CellDerivation(latex, note, (fd,))

    return solutions.make_step("check", title, np.array([[analytic]]), places, symbol=analytic_symbol,
                               lhs=analytic_symbol, formula="", exact_cells=[[exact]], work=work, note=note,
                               derive=derive)


def title(key: str, **params: Any) -> Msg:
    return msg(f"solution.backward.{key}", **params)


def cell_params(i: int, j: int) -> dict[str, int]:
    return {"row": i + 1, "col": j + 1}


# ---------------------------------------------------------------- putting a solution together


def assemble(ex: Exercise, before: Mapping[str, Sequence[solutions.Step]],
             after: Sequence[solutions.Step]) -> list[solutions.Step]:
    """The generic matrix-form steps of `ex`, each preceded by its derivation steps, then `after`."""
    out: list[solutions.Step] = []
    for step in solutions.generic_solve(ex):
        out += list(before.get(step.name, ()))
        out.append(step)
    return out + list(after)


def check(ex: Exercise, loss: Callable[[dict[str, np.ndarray]], float], loss_latex: str,
          point: Mapping[str, np.ndarray], name: str, cell: tuple[int, int], part: str,
          extra: Sequence[L.Line] = (), symbols: tuple[str, str, str] | None = None) -> solutions.Step:
    """The closing check of a solution: entry `cell` of `name` against the same cell of part `part`
    (`symbols`: the LaTeX of that entry, of the part's cell, and the entry as plain text, when they are
    not name_{ij}, (part)_{ij} and name(i, j))."""
    values = values_of(ex)
    i, j = cell
    variable, analytic, entry = symbols or (at(name, i, j), at(part, i, j), f"{name}({i + 1}, {j + 1})")
    return check_step(title("check"), title("note_check", entry=entry, part=part),
                      loss, loss_latex, point, name, cell, variable, analytic, float(values[part][i, j]),
                      places_of(ex, part), extra)


def jacobian(values: Mapping[str, Any], i: int, places: int) -> solutions.Step:
    return jacobian_step("jacobian", title("jacobian", row=i + 1), title("note_jacobian", row=i + 1), values, i,
                         places)


def scale(values: Mapping[str, Any], i: int, j: int, places: int) -> solutions.Step:
    return scale_step("scale", title("scale"), title("note_scale", d_k=int(values["d_k"])), values, i, j, places)


def widest_row(A: np.ndarray) -> int:
    """The row of A that spreads its weight over the most keys (the last such): its Jacobian shows most."""
    counts = np.count_nonzero(np.abs(np.asarray(A)) > 1e-12, axis=1)  # (n,)
    return int(np.flatnonzero(counts == counts.max())[-1])
