"""Multi-head attention: h small heads side by side, concatenated, and (level 3) projected by W_O.

    head_i = softmax(mask(X W_Qi (X W_Ki)ᵀ / √d_k)) X W_Vi        concat = [head_1 | … | head_h]
    out = concat W_O

The heads are one more axis of the stack: X (B, 1, n, d) and W_Q (B, h, d, d_k) run through the step
records give every head's Q, K, V, scores … O (B, h, n, d_v) at once, so a catalogued mistake is made in
every head alike and kept apart in each head's output, the concatenation and out. Heads concatenated
out of order is the kind's own mistake. The exercise names each head's weights: W_Q1, W_K1, W_V1, …
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations, permutations

import numpy as np

from ... import solutions
from ...core import budget, misconceptions, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import matrices, no_zero_lines, pooled_matrices, round_half_up
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids

ID = "multi_head"
ORDER = 80
VERSION = 8
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {1: (ExpSeries(1, 1, -4, 4),), 2: (ExpSeries(1, 2, -4, 4, root=2),), 3: (ExpSeries(1, 2, -4, 4, root=2),)}
# every catalogued mistake that can change a head's output: the sampler keeps them apart in every head
# not mask_diagonal: it leaves the first query no key, so no one can write the O it gives; Q K (no transpose)
# conforms where n = d_k (level 2)
GUARDS = ("transposed_scores", "no_scaling", "scaled_by_dk", "mask_wrong_triangle", "no_mask", "mask_after_softmax",
          "softmax_columns", "no_exp", "weights_transposed", "mask_zero_instead_of_inf", "softmax_no_normalise",
          "scaled_times_sqrt_dk", "scaled_by_sqrt_d_model", "scores_not_transposed")
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("concat_order",)

# level: (tokens n, heads h, d_k, d_v, values of X, output projection W_O?). From level 2 on d_k = 2 =
# d_model: each head divides by √2, so forgetting the scaling (or dividing by d_k) changes its output.
# Level 1 is about heads side by side and their concatenation: two whole heads do not fit its 5 minutes
# written out, so its heads keep d_k = 1, X = I (each head's Q, K, V are its weights, read off) and the
# mask (the first query's weight is 1). Level 2 has two tokens and X = I for the same reason, level 3 heads of
# d_v = 1.
SIZES = {1: (2, 2, 1, 1, (0, 1), False),
         2: (2, 2, 2, 1, (-1, 0, 1, 2), False),
         3: (3, 2, 2, 1, (-1, 0, 1, 2), True)}
IDENTITY_X = (1, 2)  # levels whose X is the identity
CAUSAL = {1: True}  # levels that always mask (the others draw it)
D_MODEL = 2
WEIGHT_VALUES = (-1, 0, 1)  # entries of every weight matrix: projections are sums, not products
HEAD_VALUES = {1: (-1, 0, 1, 2), 2: (-1, 0, 1, 2)}  # heads' weights read off as Q, K, V (X = I): a little wider
MAX_SCORE = 4  # |q_i k_j|: the exponents stay small whole numbers
BATCH = 128  # level 2 (two tokens) keeps about one candidate in 300: a wider batch, fewer rounds


def head_names(i: int) -> tuple[str, str, str]:
    return f"W_Q{i}", f"W_K{i}", f"W_V{i}"


def head_count(ex: Exercise) -> int:
    return sum(1 for name in ex.given if name.startswith("W_Q"))


def head_given(given: dict, i: int) -> dict:
    """Head i (1-based) as a single-head pipeline input: X, W_Q, W_K, W_V, d_k, causal."""
    w_q, w_k, w_v = head_names(i)
    return {"X": given["X"], "W_Q": given[w_q], "W_K": given[w_k], "W_V": given[w_v],
            "d_k": int(np.shape(given[w_q])[1]), "causal": bool(given.get("causal", False))}


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of candidates: X, h heads of weights with no zero column and (level 3) W_O."""
    n, h, d_k, d_v, x_values, projected = SIZES[level]
    causal = CAUSAL[level] if level in CAUSAL else bool(rng.integers(2))
    X = np.repeat(np.eye(n, D_MODEL)[None], BATCH, axis=0) if level in IDENTITY_X \
        else matrices(rng, BATCH, (n, D_MODEL), x_values)  # (B, n, d)
    given = {"X": X[:, None],  # (B, 1, n, d): every head reads X
             "W_Q": _weights(rng, h, d_k, level), "W_K": _weights(rng, h, d_k, level),  # (B, h, d, d_k)
             "W_V": _weights(rng, h, d_v, level)}  # (B, h, d, d_v)
    names = [f"O{i}" for i in range(1, h + 1)] + ["concat"]
    if projected:
        given["W_O"] = pooled_matrices(rng, BATCH, (h * d_v, D_MODEL), WEIGHT_VALUES, rows=False)  # (B, h·d_v, d)
        names.append("out")
    stacked = tuple(given)
    given.update(d_k=d_k, causal=causal)
    return Batch(given, stacked, names, params={"n": n, "h": h, "d_k": d_k, "d_v": d_v, "width": h * d_v},
                 keep=lambda env: _hand_friendly(env, causal),
                 decimals=spec(level).decimals, derive=_heads, sources={name: ("O",) for name in names},
                 own={"concat_order": _heads_swapped}, shown=_named)


def _weights(rng: np.random.Generator, h: int, width: int, level: int) -> np.ndarray:
    """(B, h, d, width): entries −1, 0, 1 (level 1: HEAD_VALUES), no zero column (a zero row is fine: that input is
    ignored)."""
    values = HEAD_VALUES.get(level, WEIGHT_VALUES)
    drawn = pooled_matrices(rng, BATCH * h, (D_MODEL, width), values, rows=False)  # (B·h, d, width)
    return drawn.reshape(BATCH, h, D_MODEL, width)


def _heads(env) -> dict[str, np.ndarray]:
    """Each head's output O_i, their concatenation and (with W_O) out = concat W_O."""
    O = env["O"]  # (B, h, n, d_v)
    parts = {f"O{i}": O[:, i - 1] for i in range(1, O.shape[1] + 1)}  # (B, n, d_v) each
    parts["concat"] = np.concatenate(list(parts.values()), axis=-1)  # (B, n, h·d_v)
    if "W_O" in env:
        parts["out"] = parts["concat"] @ env["W_O"]  # (B, n, d)
    return parts


def _heads_swapped(env) -> dict[str, np.ndarray]:
    """concat_order: the heads' outputs side by side in reverse order (the one other order of two heads)."""
    O = env["O"]  # (B, h, n, d_v)
    return {"concat": np.concatenate([O[:, i] for i in reversed(range(O.shape[1]))], axis=-1)}  # (B, n, h·d_v)


def _named(given: dict) -> dict:
    """One candidate's given values as the exercise stores them: X, then each head's W_Qi, W_Ki, W_Vi."""
    named = {"X": given["X"][0]}  # (n, d)
    for i in range(1, len(given["W_Q"]) + 1):
        named.update(zip(head_names(i), (given[w][i - 1] for w in ("W_Q", "W_K", "W_V"))))  # (d, d_k or d_v)
    if "W_O" in given:
        named["W_O"] = given["W_O"]
    return named | {"d_k": given["d_k"], "causal": given["causal"]}


def _hand_friendly(env, causal: bool) -> np.ndarray:
    """Per candidate: X with no zero row or column, and in every head small scores that are not symmetric
    (else K Qᵀ looks right) from keys that differ, some query that sees two keys scoring them differently
    (else the weights are a plain mean and the scaling changes nothing), a nonzero hidden score (else
    "mask with 0" is no mask), every token's value nonzero and not all alike (else a weight changes nothing
    in O); heads that attend differently, and (level 3) an output that is not all zero."""
    ok = no_zero_lines(env["X"][:, 0])
    S, K, V = env["scores"], env["K"], env["V"]  # (B, h, n, n), (B, h, n, d_k), (B, h, n, d_v)
    head = (np.abs(S).max(axis=(-2, -1)) <= MAX_SCORE) & (np.abs(S - S.mT).max(axis=(-2, -1)) > 0)  # (B, h)
    head &= np.ptp(K, axis=(-2, -1)) > 0
    seen = np.tril(np.ones(S.shape[-2:], dtype=bool)) if causal else np.ones(S.shape[-2:], dtype=bool)  # (n, n)
    spread = np.where(seen, S, -np.inf).max(axis=-1) - np.where(seen, S, np.inf).min(axis=-1)  # (B, h, n)
    head &= (spread > 0).any(axis=-1)
    if causal:
        head &= (S[..., ~seen] != 0).any(axis=-1)
    head &= (V != 0).any(axis=-1).all(axis=-1) & (np.ptp(V, axis=-2).max(axis=-1) > 0)
    ok &= head.all(axis=1)
    A = env["A"]  # (B, h, n, n)
    for a, b in combinations(range(A.shape[1]), 2):
        ok &= np.abs(A[:, a] - A[:, b]).max(axis=(-2, -1)) > 1e-9
    if "out" in env:
        ok &= np.abs(env["out"]).max(axis=(-2, -1)) > 1e-9
    return ok


def operations(ex: Exercise) -> budget.Operations:
    """The hand work of `ex` (exercises.core.budget): its heads run through the records as one stack."""
    given = {"X": ex.given["X"], **{w: np.stack([ex.given[f"{w}{i}"] for i in range(1, head_count(ex) + 1)])
                                   for w in ("W_Q", "W_K", "W_V")}}  # (h, d, d_k or d_v)
    env = dict(pipeline.run(given | {"d_k": ex.given["d_k"], "causal": ex.given["causal"]}))
    env.update(concat=ex.part("concat").reference, W_O=ex.given.get("W_O"))
    return _hand_work(env, budget.parts_written(ex))


def _hand_work(env, written: budget.Operations) -> budget.Operations:
    """Every head's steps from X to O as the step records count them (on the stack of heads: their sum),
    the parts `written`, and concat · W_O, which no record knows."""
    given = {k: env[k] for k in ("X", "W_Q", "W_K", "W_V", "d_k", "causal")}
    total = budget.count(given, ["O"], env, written=()) + written
    if env.get("W_O") is not None:
        total = total + budget.product_operations(env["concat"], env["W_O"])
    return total


def _head_mistakes(one_head: dict) -> dict[str, np.ndarray]:
    """{misconception id: the head output O that mistake gives} for every catalogued mistake that changes O."""
    reference = dict(pipeline.run(one_head, until={"O"}))
    found = {}
    for mid in misconceptions.CATALOG:
        if "O" not in pipeline.AFFECTED.get(mid, frozenset()):
            continue
        env = pipeline.run_mistake(one_head, reference, mid, until={"O"})
        if "O" in env.tainted:
            found[mid] = env["O"]
    return found


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The statement with mask(·) in each head's formula only when the heads are causal."""
    return ("kind.multi_head.prompt_causal",) if ex.given.get("causal") else ("kind.multi_head.prompt",)


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """A head computed with a catalogued mistake, or the heads concatenated in the wrong order."""
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    h = head_count(ex)
    if part.name.startswith("O") and part.name[1:].isdigit():
        for mid, alt in _head_mistakes(head_given(ex.given, int(part.name[1:]))).items():
            if misconceptions.matches(value, alt, tolerance):
                return mid
    if part.name == "concat":
        heads = [ex.part(f"O{i}").reference for i in range(1, h + 1)]
        for order in permutations(range(h)):
            if list(order) != sorted(order):
                swapped = np.concatenate([heads[k] for k in order], axis=1)  # (n, h·d_v)
                if misconceptions.matches(value, swapped, tolerance):
                    return "concat_order"
    return None


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """The values a learner carries forward (the grader's candidates): each head's O through its own
    head's pipeline unless the learner gave it, concat from the O's unless given, out = concat · W_O
    unless given; every computed value rounded half-up to `rounding` places (None: exact)."""
    env = dict(values)
    h = head_count(ex)
    for i in range(1, h + 1):
        if f"O{i}" not in env:
            env[f"O{i}"] = pipeline.run(head_given(ex.given, i), until={"O"}, rounding=rounding)["O"]
    if "concat" not in env:
        heads = np.broadcast_arrays(*[env[f"O{i}"] for i in range(1, h + 1)])  # stacked in a reach run
        env["concat"] = np.concatenate(heads, axis=-1)  # (n, h·d_v)
    if "W_O" in ex.given and "out" not in env:
        with np.errstate(invalid="ignore", over="ignore"):  # a learner's ∞ or huge entries
            env["out"] = round_half_up(env["concat"] @ ex.given["W_O"], rounding)  # (n, d)
    return env


# ---------------------------------------------------------------- worked solution

CONCAT = r"\mathrm{concat}"


def solve(ex: Exercise) -> list[solutions.Step]:
    """Each head through the pipeline (its symbols tagged Q^{(i)} …), then the concatenation and W_O."""
    h = head_count(ex)
    steps: list[solutions.Step] = []
    head_outputs = []
    for i in range(1, h + 1):
        part = ex.part(f"O{i}")
        for step in solutions.pipeline_steps(head_given(ex.given, i), ["O"], places={"O": part.decimals},
                                             values={"O": part.reference}, tag=str(i)):
            name = part.name if step.name == "O" else f"{step.name}{i}"
            steps.append(replace(step, name=name, title=msg("solution.multi_head.head", head=i, step=step.title)))
        head_outputs.append(steps[-1])
    steps.append(_concat_step(ex, head_outputs))
    if "out" in ex.part_names:
        steps.append(_out_step(ex, steps[-1]))
    return steps


def _concat_step(ex: Exercise, heads: list[solutions.Step]) -> solutions.Step:
    part = ex.part("concat")
    d_v = heads[0].shape[1]
    symbols = [L.symbol("O", str(i)) for i in range(1, len(heads) + 1)]
    exact = [[c for head in heads for c in head.exact_cells[r]] for r in range(part.shape[0])]

    def derive(i: int, j: int) -> solutions.CellDerivation:
        k, c = divmod(j, d_v)  # column j of the concatenation is column c of head k + 1
        latex = L.chain(L.cell(CONCAT, i, j), L.cell(symbols[k], i, c), L.decimal(part.reference[i, j], part.decimals))
        return solutions.CellDerivation(latex, msg("solution.multi_head.concat_cell", head=k + 1, column=c + 1))

    return solutions.make_step("concat", msg("solution.multi_head.concat"), part.reference, part.decimals,
                               symbol=CONCAT, formula=L.bmatrix([symbols]), exact_cells=exact,
                               note=msg("solution.multi_head.concat_note", width=part.shape[1]), derive=derive)


def _out_step(ex: Exercise, concat: solutions.Step) -> solutions.Step:
    """Y = concat W_O, from the heads' outputs as written (to the part's decimals), exact where short."""
    part, W_O = ex.part("out"), ex.given["W_O"]
    C = concat.value  # (n, h·d_v)
    shown = [[_shown(concat, i, k) for k in range(C.shape[1])] for i in range(C.shape[0])]  # (n, h·d_v)
    weights = [[solutions.number(L.number(x), float(x)) for x in row] for row in W_O]  # (h·d_v, d)
    rounded = any(c.rounded for row in shown for c in row)
    rel = L.APPROX if rounded else "="
    work = [("", rel, f"{L.bmatrix([[c.text for c in row] for row in shown])} {L.matrix_exact(W_O)}")]
    subs = solutions.records.work_substitutions(shown, weights, part.decimals)
    exact = [[L.short(L.to_exact(x)) for x in row] for row in part.reference]  # (n, d) short exact forms

    def derive(i: int, j: int) -> solutions.CellDerivation:
        pairs = [(shown[i][k], weights[k][j]) for k in range(C.shape[1])]
        latex, sub = solutions.worked_chain(
            L.cell("Y", i, j), exact[i][j], part.reference[i, j], part.decimals,
            L.total([L.product(a.text, b.text) for a, b in pairs]), "sum", pairs,
            rf"\sum_{{k}} {L.entry(CONCAT, f'{L.index(i)}k')} (W_O)_{{k{L.index(j)}}}")
        note = msg("solution.cell.rounded_inputs", places=part.decimals) if sub.exact_beside else None
        return solutions.CellDerivation(latex, note, (sub,))

    return solutions.make_step("out", msg("solution.multi_head.out"), part.reference, part.decimals, symbol="Y",
                               formula=rf"{CONCAT} \, W_O", work=work, exact_cells=exact, derive=derive,
                               work_substitutions=subs)


def _shown(step: solutions.Step, i: int, j: int) -> solutions.Number:
    """A cell of an earlier part as a learner carries it: as written to the part's decimals (a whole
    number stays whole; 2/3 is carried as 0.67)."""
    text = step.decimals[i][j]
    x = float(step.value[i, j])
    if float(x).is_integer():
        return solutions.number(str(int(x)))
    return solutions.number(text, None, not L.is_exact_decimal(text, x))


def aids(ex: Exercise) -> solutions.Aids:
    """e^x for every exponent in any head's softmax, and √d_k."""
    heads = [head_given(ex.given, i) for i in range(1, head_count(ex) + 1)]
    return softmax_aids(ex, heads, L.sqrt_dk(int(ex.given["d_k"])))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"[\,\mathrm{head}_1 \mid \dots \mid \mathrm{head}_h\,]\,W_O")
SHEET = SheetSection("forward", (
    Formula(r"[[\mathrm{head}_i | n | d_v]] = \operatorname{Attention}(X W_Q^{(i)},\ X W_K^{(i)},\ X W_V^{(i)}), "
            r"\qquad i = 1, \dots, h", "formulas.multi_head.heads"),
    Formula(r"[[C | n | h d_v]] = [\,\mathrm{head}_1 \mid \dots \mid \mathrm{head}_h\,], \qquad "
            r"[[\mathrm{out} | n | d_{\mathrm{out}}]] = C\,[[W_O | h d_v | d_{\mathrm{out}}]]",
            "formulas.multi_head.concat"),
))
