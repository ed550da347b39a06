"""Linear attention: φ(Q) (φ(K)ᵀ V) / φ(Q) (φ(K)ᵀ 1), the same output as the quadratic order, cheaper for long n.

    φ(x) = elu(x) + 1 (x + 1 on the non-negative entries drawn here)
    KV = φ(K)ᵀ V,  z = φ(K)ᵀ 1,  O_i = φ(q_i) KV / φ(q_i) z          levels 1-2 (level 2 also the multiplications
                                                                       of both orders)
    S_t = S_{t−1} + φ(k_t) v_tᵀ,  z_t = z_{t−1} + φ(k_t),  O_t = φ(q_t) S_t / φ(q_t) z_t      level 3 (causal, d_v = 1:
                                                                       row t of S_t is the state after token t)

φ(Q), φ(K), KV and z are step records; O, the running states and the counts are this kind's own values
(attention_core.linear), as are its mistakes: the normaliser left out, the softmax kept, a state that
includes later tokens, the two counts swapped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core import linear
from attention_core.ops import softmax

from ... import solutions
from ...core import budget, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import matrices, round_half_up
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from .._shared.hand import own_diagnosis

ID = "linear_attention"
ORDER = 86  # after gqa (82) and rope (84): another way round the n × n weights
VERSION = 1
LEVELS = (1, 2, 3)
GUARDS = ()  # no step record's mistake reaches these parts; the kind keeps its own apart (Batch.own)
MISTAKES = ("linear_no_normaliser", "linear_softmax_kept", "linear_state_sees_future", "linear_counts_swapped")


@dataclass(frozen=True)
class Size:
    n: int
    d_k: int
    d_v: int
    causal: bool
    parts: tuple[str, ...]
    values: tuple[int, ...]  # entries of V (Q and K: 0, 1, 2, so that φ(x) = x + 1)


SIZES = {1: Size(n=2, d_k=2, d_v=1, causal=False, parts=("phi_Q", "phi_K", "KV", "z", "O"), values=(-1, 1, 2)),
         2: Size(n=3, d_k=2, d_v=2, causal=False, parts=("phi_Q", "phi_K", "KV", "z", "O", "mults"),
                 values=(-2, -1, 0, 1, 2)),
         3: Size(n=4, d_k=2, d_v=1, causal=True, parts=("phi_Q", "phi_K", "S_t", "z_t", "O"),
                 values=(-2, -1, 0, 1, 2))}
QK_VALUES = (0, 1, 2)
BATCH = 64


def _own_values(env, causal: bool) -> dict[str, np.ndarray]:
    """O, the running states and the counts from the records' φ(Q), φ(K) (and V)."""
    phi_Q, phi_K, V = env["phi_Q"], env["phi_K"], env["V"]  # (B, n, d_k), (B, n, d_k), (B, n, d_v)
    n, d_k = phi_Q.shape[-2:]
    d_v = V.shape[-1]
    if causal:
        S, z = linear.causal_states(phi_K, V)  # (B, n, d_k, d_v), (B, n, d_k)
        return {"S_t": S[..., 0], "z_t": z, "O": linear.causal_linear_order(phi_Q, S, z)}  # d_v = 1
    counts = np.array([[linear.multiplications(n, d_k, d_v)]], dtype=float)  # (1, 1, 2)
    return {"O": linear.linear_order(phi_Q, env["KV"], env["z"]), "mults": np.repeat(counts, len(phi_Q), axis=0)}


def _mistakes(causal: bool):
    """The kind's own mistakes: {id: env -> {part: stacked value}}."""
    def no_normaliser(env):
        if causal:
            S, _ = linear.causal_states(env["phi_K"], env["V"])
            return {"O": np.einsum("...tk,...tkv->...tv", env["phi_Q"], S)}
        return {"O": env["phi_Q"] @ env["KV"]}

    def softmax_kept(env):  # the n × n products put through a softmax instead of divided by their sums
        W = env["phi_Q"] @ np.swapaxes(env["phi_K"], -1, -2)  # (B, n, n)
        if causal:
            W = np.where(np.triu(np.ones(W.shape[-2:], dtype=bool), k=1), -np.inf, W)
        return {"O": softmax(W) @ env["V"]}

    def sees_future(env):  # the state of the whole sequence at every t
        phi_K, V = env["phi_K"], env["V"]
        n = phi_K.shape[-2]
        S_all = np.repeat((np.swapaxes(phi_K, -1, -2) @ V)[..., None, :, 0], n, axis=-2)  # (B, n, d_k)
        z_all = np.repeat(phi_K.sum(axis=-2, keepdims=True), n, axis=-2)  # (B, n, d_k)
        return {"S_t": S_all, "z_t": z_all, "O": linear.quadratic_order(env["phi_Q"], phi_K, V)}

    def counts_swapped(env):
        return {"mults": env["mults"][..., ::-1]}

    own = {"linear_no_normaliser": no_normaliser, "linear_softmax_kept": softmax_kept}
    own.update({"linear_state_sees_future": sees_future} if causal else {"linear_counts_swapped": counts_swapped})
    return own


def _batch(given: dict, size: Size, decimals: int, params: dict | None = None) -> Batch:
    return Batch(given, ("Q", "K", "V"), list(size.parts), params=params or {}, keep=_hand_friendly,
                 decimals=decimals, derive=lambda env: _own_values(env, size.causal),
                 sources={"O": ("phi_Q", "phi_K", "KV", "z"), "S_t": ("phi_K",), "z_t": ("phi_K",), "mults": ()},
                 own=_mistakes(size.causal))


def draw(rng: np.random.Generator, level: int) -> Batch:
    """Q, K with entries 0, 1, 2 (no zero row), V from the level's values."""
    size = SIZES[level]
    given = {"Q": matrices(rng, BATCH, (size.n, size.d_k), QK_VALUES),  # (B, n, d_k)
             "K": matrices(rng, BATCH, (size.n, size.d_k), QK_VALUES),  # (B, n, d_k)
             "V": matrices(rng, BATCH, (size.n, size.d_v), size.values),  # (B, n, d_v)
             "linear": True, "causal": size.causal}
    params = {"n": size.n, "d_k": size.d_k, "d_v": size.d_v}
    return _batch(given, size, spec(level).decimals, params)


def _hand_friendly(env) -> np.ndarray:
    """Per candidate: the queries and keys differ from token to token, no value row is all zero, and the
    output is no plain mean of the values (some query's weights are unequal)."""
    ok = np.ones(len(env["Q"]), dtype=bool)
    for name in ("Q", "K"):
        M = env[name]
        ok &= (M[:, 1:] != M[:, :1]).any(axis=(1, 2))
    ok &= (env["V"] != 0).any(axis=2).all(axis=1)
    W = env["phi_Q"] @ np.swapaxes(env["phi_K"], 1, 2)  # (B, n, n)
    return ok & (W.max(axis=2) > W.min(axis=2)).any(axis=1)


def size_of(ex: Exercise) -> Size:
    """The level's size, or, for a learner's own numbers (Check my work: one form for every level), the size
    of the level with their causal flag."""
    causal = bool(ex.given["causal"])
    own = SIZES[ex.level]
    return own if own.causal == causal else next(size for size in SIZES.values() if size.causal == causal)


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    if ex.given["causal"]:
        return ("kind.linear_attention.prompt", "kind.linear_attention.causal")
    keys = ("kind.linear_attention.prompt", "kind.linear_attention.full")
    return (*keys, "kind.linear_attention.mults") if "mults" in ex.part_names else keys


# ---------------------------------------------------------------- grading


def mistakes_of(ex: Exercise) -> dict[str, dict[str, np.ndarray]]:
    """{part: {mistake id: what it gives}} for this exercise; memoised on the (immutable) exercise."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "linear_mistakes" not in memo:
        memo["linear_mistakes"] = _mistakes_of(ex)
    return memo["linear_mistakes"]


def _mistakes_of(ex: Exercise) -> dict[str, dict[str, np.ndarray]]:
    size = size_of(ex)
    stacked = {k: (np.asarray(v, dtype=float)[None] if k in ("Q", "K", "V") else v) for k, v in ex.given.items()}
    batch = _batch(stacked, size, spec(ex.level).decimals)
    env = batch.computed(batch.given)
    found: dict[str, dict[str, np.ndarray]] = {}
    for mid, mistaken in batch.own.items():
        for name, value in mistaken(env).items():
            if name in ex.part_names:
                found.setdefault(name, {})[mid] = value[0]
    return found


def diagnose(ex: Exercise, part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex).get(part.name, {}))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """φ(Q), φ(K), KV and z from the records, the states from φ(K) and V, O from those and the counts, each
    unless the learner gave it (every computed value rounded half-up to `rounding` places; None: exact)."""
    env = {**pipeline.run({**ex.given, **values}, rounding=rounding), **values}
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            if ex.given["causal"]:
                S, z = linear.causal_states(env["phi_K"], np.asarray(ex.given["V"], dtype=float))
                env.setdefault("S_t", round_half_up(S[..., 0], rounding))  # d_v = 1: row t is S_t
                env.setdefault("z_t", round_half_up(z, rounding))
                O = linear.causal_linear_order(env["phi_Q"], np.asarray(env["S_t"])[..., None], env["z_t"])
            else:
                O = linear.linear_order(env["phi_Q"], env["KV"], env["z"])
                env.setdefault("mults", np.array([linear.multiplications(*ex.given["Q"].shape,
                                                                        ex.given["V"].shape[1])], dtype=float))
    except (ValueError, KeyError):  # a learner's value of a shape that does not combine
        return env
    env.setdefault("O", round_half_up(O, rounding))
    return env


def operations(ex: Exercise):
    """The records' work to φ(Q), φ(K), KV and z (or the states), the quotient of each output cell, every cell."""
    size = size_of(ex)
    env = pipeline.reference_env(ex)
    records = [n for n in ("phi_Q", "phi_K", "KV", "z") if n in ex.part_names or not size.causal]
    total = budget.count(ex.given, records, env, written=())
    phi_Q, phi_K = env["phi_Q"], env["phi_K"]
    if size.causal:  # each state: the last one plus φ(k_t) v_t (z_t: plus φ(k_t)), then φ(q_t)·S_t and φ(q_t)·z_t
        total = total + budget.Operations(multiply_adds=phi_K.size, additions=2 * phi_K.size)
        total = total + budget.product_operations(phi_Q, np.ones((size.d_k, 2)))
    else:
        total = total + budget.product_operations(phi_Q, np.hstack([env["KV"], env["z"]]))
    return total + budget.Operations(divisions=int(np.size(ex.part("O").reference))) + budget.parts_written(ex)


# ---------------------------------------------------------------- worked solution


def _numbers(M: np.ndarray) -> list[list[solutions.Number]]:
    return [[solutions.number(L.number(float(x))) for x in row] for row in np.atleast_2d(M)]


def _phi_step(ex: Exercise, name: str) -> solutions.Step:
    """φ(x) = x + 1 for x > 0, e⁰ = 1 for x = 0: cell by cell."""
    source = name[-1]
    part, given = ex.part(name), np.asarray(ex.given[source], dtype=float)

    def derive(i: int, j: int) -> solutions.CellDerivation:
        x = given[i, j]
        here = L.cell(rf"\phi({source})", i, j)
        if x > 0:
            one, xn = solutions.number("1"), solutions.number(L.number(x))
            latex = L.chain(here, rf"{L.number(x)} + 1", L.number(part.reference[i, j]))
            return solutions.CellDerivation(latex, msg("solution.linear_attention.phi_positive"),
                                            (solutions.Substitution("sum", ((xn,), (one,)), L.number(x + 1), None),))
        return solutions.CellDerivation(L.chain(here, L.exp_of(L.number(x)), L.number(part.reference[i, j])),
                                        msg("solution.linear_attention.phi_zero"))

    exact = [[L.number(x) for x in row] for row in part.reference]
    return solutions.make_step(name, msg(f"solution.linear_attention.{name}"), part.reference, 0,
                               symbol=rf"\phi({source})", lhs=rf"\phi({source})_{{ij}}",
                               formula=rf"\operatorname{{elu}}({source}_{{ij}}) + 1", exact_cells=exact, derive=derive)


def _z_step(ex: Exercise, name: str, causal: bool) -> solutions.Step:
    """z (column sums of φ(K)) or z_t (row t: the sums over tokens 1 … t)."""
    part = ex.part(name)
    phi_K = linear.feature_map(ex.given["K"])
    cells = _numbers(phi_K)

    def derive(i: int, j: int) -> solutions.CellDerivation:
        if causal:  # row i = token i + 1: z_t[j] summed over tokens 1 … t
            terms, lhs = [cells[t][j] for t in range(i + 1)], L.cell("z_t", i, j)
        else:
            terms, lhs = [row[i] for row in cells], L.cell("z", i, j)
        text = L.total([t.text for t in terms])
        latex, sub = solutions.worked_chain(lhs, L.number(part.reference[i, j]), part.reference[i, j], 0, text,
                                            "sum", [[t] for t in terms])
        return solutions.CellDerivation(latex, None, (sub,))

    formula = r"z_{t} = z_{t-1} + \phi(k_t)" if causal else r"\phi(K)^{\top} \mathbf{1}"
    return solutions.make_step(name, msg(f"solution.linear_attention.{name}"), part.reference, 0,
                               symbol="z_t" if causal else "z", formula=formula,
                               exact_cells=[[L.number(x) for x in row] for row in part.reference], derive=derive)


def _state_step(ex: Exercise) -> solutions.Step:
    """S_t: row t = Σ_{j ≤ t} v_j φ(k_j) (d_v = 1), each row the one before plus the new token's."""
    part = ex.part("S_t")
    phi_K, V = _numbers(linear.feature_map(ex.given["K"])), _numbers(ex.given["V"])

    def derive(i: int, j: int) -> solutions.CellDerivation:
        pairs = [(phi_K[t][j], V[t][0]) for t in range(i + 1)]
        text = L.total([L.product(a.text, b.text) for a, b in pairs])
        latex, sub = solutions.worked_chain(L.cell("S_t", i, j), L.number(part.reference[i, j]),
                                            part.reference[i, j], 0, text, "sum", pairs)
        return solutions.CellDerivation(latex, msg("solution.linear_attention.state_cell", t=i + 1), (sub,))

    return solutions.make_step("S_t", msg("solution.linear_attention.S_t"), part.reference, 0, symbol="S_t",
                               formula=r"S_{t} = S_{t-1} + \phi(k_t)\, v_t^{\top}",
                               exact_cells=[[L.number(x) for x in row] for row in part.reference],
                               note=msg("solution.linear_attention.state_note"), derive=derive)


def _output_step(ex: Exercise) -> solutions.Step:
    """O_ij = φ(q_i)·KV_{:j} / φ(q_i)·z, the numerator and denominator written out."""
    part, causal = ex.part("O"), bool(ex.given["causal"])
    env = pipeline.reference_env(ex)
    phi_Q = _numbers(env["phi_Q"])
    if causal:
        S, z = ex.part("S_t").reference, ex.part("z_t").reference  # (n, d_k) each: row t
        tops, bottoms = _numbers(S), _numbers(z)
    else:
        tops, bottoms = _numbers(env["KV"]), _numbers(env["z"])

    def derive(i: int, j: int) -> solutions.CellDerivation:
        d_k = len(phi_Q[i])
        if causal:
            top = [(phi_Q[i][k], tops[i][k]) for k in range(d_k)]
            bottom = [(phi_Q[i][k], bottoms[i][k]) for k in range(d_k)]
        else:
            top = [(phi_Q[i][k], tops[k][j]) for k in range(d_k)]
            bottom = [(phi_Q[i][k], bottoms[k][0]) for k in range(d_k)]
        num, den = (sum(a.value * b.value for a, b in pairs) for pairs in (top, bottom))
        nt, dt = solutions.number(L.number(float(num))), solutions.number(L.number(float(den)))
        sum_text = [L.total([L.product(a.text, b.text) for a, b in pairs]) for pairs in (top, bottom)]
        latex, sub = solutions.worked_chain(L.cell("O", i, j), None, part.reference[i, j], part.decimals,
                                            L.frac(nt.text, dt.text), "quotient", [[nt], [dt]],
                                            L.frac(*sum_text))
        lines = (solutions.Substitution("sum", tuple(top), nt.text, None),
                 solutions.Substitution("sum", tuple(bottom), dt.text, None), sub)
        return solutions.CellDerivation(latex, None, lines)

    formula = (r"\frac{\phi(q_t)\, S_t}{\phi(q_t) \cdot z_t}" if causal
               else r"\frac{\phi(q_i)\, \mathrm{KV}}{\phi(q_i)\, z}")
    return solutions.make_step("O", msg("solution.linear_attention.O"), part.reference, part.decimals, symbol="O",
                               lhs="O_{i}", formula=formula, note=msg("solution.linear_attention.O_note"),
                               derive=derive)


def _counts_step(ex: Exercise) -> solutions.Step:
    part = ex.part("mults")
    n, d_k, d_v = (ex.params[k] for k in ("n", "d_k", "d_v"))
    quad, lin = (int(x) for x in part.reference[0])
    num = solutions.number
    lines = (rf"n^2 (d_k + d_v) = {n} \cdot {n} \cdot {d_k} + {n} \cdot {n} \cdot {d_v} = {quad}",
             rf"2 n\, d_k d_v + n\, d_k = 2 \cdot {n} \cdot {d_k} \cdot {d_v} + {n} \cdot {d_k} = {lin}")
    records = ((num(str(n)), num(str(n)), num(str(d_k))), (num(str(n)), num(str(n)), num(str(d_v)))), \
        ((num("2"), num(str(n)), num(str(d_k)), num(str(d_v))), (num(str(n)), num(str(d_k))))
    subs = [solutions.Substitution("sum", terms, str(value), None) for terms, value in zip(records, (quad, lin))]
    return solutions.make_step("mults", msg("solution.linear_attention.mults"), part.reference, 0,
                               symbol=r"\left[\text{quadratic},\ \text{linear}\right]",
                               exact_cells=[[str(quad), str(lin)]],
                               note=msg("solution.linear_attention.mults_note", n=n),
                               derive=lambda i, j: solutions.CellDerivation(lines[j], None, (subs[j],)))


def solve(ex: Exercise) -> list[solutions.Step]:
    """φ(Q), φ(K); KV (the records' product) and z, or the running states; O; the counts of both orders."""
    steps = [_phi_step(ex, "phi_Q"), _phi_step(ex, "phi_K")]
    if ex.given["causal"]:
        steps += [_state_step(ex), _z_step(ex, "z_t", True)]
    else:
        ctx = solutions.build_context(ex.given, ["KV"], {"KV": 0})
        steps += [solutions.BUILDERS["KV"](ctx, "KV"), _z_step(ex, "z", False)]
    steps.append(_output_step(ex))
    if "mults" in ex.part_names:
        steps.append(_counts_step(ex))
    return steps


def aids(ex: Exercise) -> solutions.Aids:
    """Nothing to look up (φ of a whole number ≥ 0 is that number plus one); the shapes of what is given."""
    return solutions.Aids(exp_table=(), sqrt_dk=None, shapes=solutions.shapes_of(ex), exp_caption=None)


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"\frac{\phi(Q)\,(\phi(K)^{\top} V)}{\phi(Q)\,(\phi(K)^{\top} \mathbf{1})}")
SHEET = SheetSection("forward", (
    Formula(r"\phi(x) = \operatorname{elu}(x) + 1 = \begin{cases} x + 1 & x > 0 \\ e^{x} & x \le 0 \end{cases}",
            "formulas.linear_attention.phi"),
    Formula(r"[[\mathrm{KV} | d_k | d_v]] = \phi(K)^{\top} V, \quad [[z | d_k | 1]] = \phi(K)^{\top} \mathbf{1}, "
            r"\quad O_i = \frac{\phi(q_i)\, \mathrm{KV}}{\phi(q_i)\, z}", "formulas.linear_attention.order"),
    Formula(r"S_t = S_{t-1} + \phi(k_t)\, v_t^{\top}, \quad z_t = z_{t-1} + \phi(k_t), \quad "
            r"O_t = \frac{\phi(q_t)\, S_t}{\phi(q_t)\, z_t}", "formulas.linear_attention.causal"),
    Formula(r"n^2 (d_k + d_v) \quad \text{against} \quad 2 n\, d_k d_v + n\, d_k", "formulas.linear_attention.cost"),
))
