"""Multi-head attention backward, through out = concat · W_O and back into one head.

    G_concat = G_out W_Oᵀ            G_W_O = concatᵀ G_out
    [G_O1 | G_O2 | …] = G_concat     (the columns of head i are the gradient of its output O_i)
    G_V1 = A1ᵀ G_O1                   (head 1's O_1 = A_1 V_1)

Given: each head's weights A_i (a real softmax: simple fractions, positive wherever the mask lets a
key be seen) and values V_i, their concatenation, W_O and the incoming gradient G_out. The mistakes
are this kind's own (grad_mh_* in its locales) and the catalogued grad_v_no_transpose; no pipeline
step makes these parts, so the kind keeps them apart itself (generate).
"""

from __future__ import annotations

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
VERSION = 3
LEVELS = (1, 2, 3)
GUARDS = ()  # no pipeline step makes these parts: the kind keeps its own mistakes apart (generate)
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("grad_mh_concat_no_transpose", "grad_mh_skips_w_o", "grad_mh_w_o_transposed", "grad_mh_w_o_not_summed",
            "grad_mh_wrong_head")

# level: (n tokens, heads h, d_v per head, d_out)
SIZES = {1: (2, 2, 1, 2), 2: (3, 2, 1, 2), 3: (3, 2, 2, 2)}
WEIGHT_VALUES = (-1, 0, 1)
MAX_TRIES = 2000


def head_count(given: dict) -> int:
    return sum(1 for name in given if name[:1] == "A" and name[1:].isdigit())


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
    """Heads whose parts are not all zero and whose mistakes all differ from the answers and from each
    other (to 2 decimals too). The time budget holds at every level even when every product term is a
    multiply-add, so it is not counted here."""
    for _ in range(MAX_TRIES):
        draft = _draft(rng, level)
        if all(np.abs(p.reference).max() > 0 for p in draft.parts) and _apart(draft.given, draft.parts):
            return draft
    raise RuntimeError(f"grad_multi_head: no variant in {MAX_TRIES} draws")


# ---------------------------------------------------------------- mistakes, diagnosis, carrying forward


def _apart(given: dict, parts) -> bool:
    """No part's mistakes within its separation of its answer or of each other (misconceptions.clashes)."""
    return not misconceptions.clash_by_part({p.name: p for p in parts},
                                            {p.name: mistakes_of(given, p.name, p.shape) for p in parts})


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
    return total + sum((budget.written(p.reference) for p in parts), budget.NONE)


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
