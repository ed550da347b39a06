"""Backpropagation from a loss: the worked example of the seed notes, with a target T.

    X = [[1, 0], [0, 1], [1, 1]],  W_Q = W_K = W_V = I₂,  causal,  L = ½‖O − T‖²

The forward pass is given as the notes state it, rounded to 2 decimals as every prompt asks (the
notes' A ≈ [[1, 0, 0], [0.330, 0.670, 0], [0.248, 0.248, 0.503]] is given as [[1, 0, 0], [0.33, 0.67, 0],
[0.25, 0.25, 0.50]]: each rounded row still sums to 1, and a variant where one does not is not drawn);
the learner starts the backward pass from the loss,

    G_O = ∂L/∂O = O − T,  then G_A = G_O Vᵀ, G_V = Aᵀ G_O, G_Z = A ⊙ (G_A − rowsum(A ⊙ G_A)),
    G_S = G_Z / √d_k, G_Q = G_S K, G_K = G_Sᵀ Q, G_W_* = Xᵀ G_*, G_X = G_Q W_Qᵀ + G_K W_Kᵀ + G_V W_Vᵀ

and every gradient is computed from exactly the numbers shown. Level 1 is the notes' example itself
(T drawn, G_O, G_A, G_V); level 2 draws X around it (G_O down to G_S); level 3 draws the weights too and
goes down to G_W_Q, G_W_K, G_W_V and G_X. The mistakes of the loss: the sign of O − T, and the ½
forgotten (2(O − T)).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attention_core import ops

from ... import solutions
from ...core import budget, misconceptions, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import distinct_rows, matrices, no_zero_lines, pooled_matrices, round_half_up
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from .._shared import backward as B

ID = "backprop_loss"
ORDER = 275
VERSION = 5
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the sampler keeps them apart
GUARDS = ("grad_a_transposed", "grad_v_no_transpose",
          "softmax_grad_missing_term", "softmax_grad_diagonal_only", "softmax_grad_sign", "grad_scores_no_scale",
          "grad_scores_times_sqrt_dk", "grad_k_no_transpose", "grad_q_transposed")
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("loss_grad_sign", "loss_grad_doubled")
# the loss's own mistakes are named on G_O only (downstream T − O is the softmax's sign mistake, and 2(O − T)
# is √d_k's at d_k = 2): no cell of G_O is 0, so both differ from O − T in every cell. The sampler keeps them
# apart too (Batch.own)
LOSS_MISTAKES = ("loss_grad_sign", "loss_grad_doubled")

NOTES_X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (3, 2): the seed notes' three tokens
FORWARD_PLACES = 2  # A and O are given as a careful student writes them (the notes' 0.330 … to 2 decimals)
# what each level asks, within its minutes (exercises.core.budget): G_V = Aᵀ G_O multiplies 2-decimal numbers
# (level 2 leaves it for G_Z), and level 3 stops at G_W_Q (G_X alone would pass 25 minutes)
PARTS = {1: ["G_O", "G_A"],
         2: ["G_O", "G_A", "G_scaled", "G_scores"],
         3: ["G_O", "G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K", "G_W_Q"]}
TOKEN_VALUES = {2: (0, 1, 2), 3: (-1, 0, 1, 2)}  # entries of X (level 1: the notes' X)
WEIGHT_VALUES = (-1, 0, 1)  # entries of W_Q, W_K, W_V at level 3 (the identity below)
TARGETS = (0, 1)  # entries of T
N, D = 3, 2  # tokens, and the width of X, Q, K, V (d_k = 2)
BATCH = 32


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of forward passes (the notes' at level 1), given to 2 decimals, each with a target T."""
    if level == 1:
        X = np.repeat(NOTES_X[None], BATCH, axis=0)  # (B, n, d)
    else:
        X = matrices(rng, BATCH, (N, D), TOKEN_VALUES[level])  # (B, n, d)
    if level == 3:
        W = {w: pooled_matrices(rng, BATCH, (D, D), WEIGHT_VALUES) for w in ("W_Q", "W_K", "W_V")}  # (B, d, d)
    else:
        W = {w: np.repeat(np.eye(D)[None], BATCH, axis=0) for w in ("W_Q", "W_K", "W_V")}  # (B, d, d)
    Q, K, V = (X @ W[f"W_{name}"] for name in "QKV")  # (B, n, d) each
    A = ops.softmax(ops.apply_mask(ops.scale(ops.scores(Q, K), D), True))  # (B, n, n)
    given = {"X": X, **W, "A": round_half_up(A, FORWARD_PLACES), "O": round_half_up(A @ V, FORWARD_PLACES),
             "T": matrices(rng, BATCH, (N, D), TARGETS)}  # (B, n, d_v)
    stacked = tuple(given)
    given.update(d_k=D, causal=True)
    return Batch(given, stacked, PARTS[level], params={"n": N, "d_k": D}, keep=lambda env: _teaches(env, level),
                 decimals=spec(level).decimals,
                 own={mid: (lambda env, mid=mid: {"G_O": _loss_mistakes(env["O"], env["T"])[mid]})
                      for mid in LOSS_MISTAKES})


def _teaches(env, level: int) -> np.ndarray:
    """Per candidate: distinct tokens and no zero line in X, weights as given that are a distribution
    (every rounded row sums to 1, every visible weight positive), no cell of O on its target (its gradient
    would be 0 whatever the sign), a softmax that passes something back, from X each of its three paths,
    and no reference a float's breadth from a half of the last place."""
    X, A = env["X"], env["A"]
    ok = distinct_rows(X) & no_zero_lines(X)
    ok &= (np.abs(A.sum(axis=2) - 1.0) <= 1e-9).all(axis=1)
    ok &= (A[:, np.tril(np.ones((N, N), dtype=bool))] > 0).all(axis=1)
    ok &= (np.abs(env["O"] - env["T"]) >= 1e-9).all(axis=(1, 2))
    asked = PARTS[level]
    alive = (["G_scaled"] if "G_scaled" in asked else []) + (["G_Q", "G_K"] if "G_Q" in asked else [])
    for name in alive:
        ok &= (np.abs(env[name]) > 0.05).any(axis=(1, 2))
    for name in asked:
        ok &= ~_near_tie(env[name])
    return ok


def _near_tie(M: np.ndarray) -> np.ndarray:
    """Per candidate: some cell within a hundredth of the last place of a half (x.xx5) that the float does not
    hold exactly (1.108 − 1.663 = −0.55499…, or G_W_Q = −2.58496): rounded half up, the exact value, the float
    and a solution line summing 4-place intermediates could then round apart. A tie the float holds exactly
    (0.375) rounds the same either way."""
    scaled = np.abs(M).reshape(len(M), -1) * 100  # (B, cells)
    near = np.abs(scaled - np.floor(scaled) - 0.5) < 0.01
    return (near & (scaled * 2 != np.round(scaled * 2))).any(axis=1)


def _loss_mistakes(O: np.ndarray, T: np.ndarray) -> dict[str, np.ndarray]:
    """{id: the G_O that mistake gives}: T − O (the sign) and 2(O − T) (the ½ forgotten)."""
    G_O = np.asarray(O, dtype=float) - np.asarray(T, dtype=float)  # (…, n, d_v)
    return {"loss_grad_sign": -G_O, "loss_grad_doubled": 2 * G_O}


def operations(ex: Exercise) -> budget.Operations:
    """The registry's count from what is given, plus one subtraction per cell of G_O = O − T."""
    return (budget.count(ex.given, ex.part_names, pipeline.reference_env(ex))
            + budget.Operations(additions=int(np.size(ex.given["O"]))))


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """The loss's own mistakes on G_O; every other part is left to the catalog."""
    if part.name != "G_O":
        return None
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    mistakes = _loss_mistakes(pipeline.reference_env(ex)["O"], ex.given["T"])  # O given, or from X (check my work)
    return next((mid for mid, alt in mistakes.items() if misconceptions.matches(value, alt, tolerance)), None)


# ---------------------------------------------------------------- worked solution


def _g_o_step(ex: Exercise) -> solutions.Step:
    part = ex.part("G_O")
    O, T = np.asarray(ex.given["O"], dtype=float), np.asarray(ex.given["T"], dtype=float)
    places = part.decimals
    o_text = [[L.number(x) for x in row] for row in O]
    exact = [[L.number(x) for x in row] for row in part.reference]

    def derive(i: int, j: int) -> solutions.CellDerivation:
        result = L.decimal(part.reference[i, j], places)
        minus_t = -T[i, j] if T[i, j] != 0 else 0.0
        minus_text = L.number(minus_t)
        sub = solutions.Substitution("sum", ((solutions.number(o_text[i][j], O[i, j]),),
                                             (solutions.number(minus_text, minus_t),)), result, places)
        latex = L.chain(L.cell("G_O", i, j), f"{L.cell('O', i, j)} - {L.cell('T', i, j)}",
                        f"{o_text[i][j]} + {L.paren(minus_text)}", result)
        return solutions.CellDerivation(latex, msg("solution.backprop_loss.G_O_cell"), (sub,))

    work = [("", "=", f"{L.matrix_exact(O)} - {L.matrix_exact(T)}")]
    return solutions.make_step("G_O", msg("solution.backprop_loss.G_O"), part.reference, places, symbol="G_O",
                               formula=r"\frac{\partial L}{\partial O} = O - T", exact_cells=exact, work=work,
                               note=msg("solution.backprop_loss.G_O_note"), derive=derive)


def solve(ex: Exercise) -> list[solutions.Step]:
    """G_O from the loss, then the backward steps, each preceded by its derivation (one cell's chain
    rule, the softmax Jacobian of the widest row, where 1/√d_k comes from, why Xᵀ)."""
    v = B.values_of(ex)
    places = {p.name: p.decimals for p in ex.parts}
    before = {"G_A": [B.chain_weights(v, *B.largest(v["G_A"]), places["G_A"])]}
    if "G_V" in places:
        before["G_V"] = [B.chain_values(v, *B.largest(v["G_V"]), places["G_V"])]
    if "G_scaled" in places:
        before["G_scaled"] = [B.jacobian(v, B.widest_row(v["A"]), places["G_scaled"])]
        before["G_scores"] = [B.scale(v, *B.largest(v["G_scaled"]), places["G_scores"])]
    if "G_Q" in places:
        before["G_Q"] = [B.chain_queries(v, *B.largest(v["G_Q"]), places["G_Q"])]
        before["G_K"] = [B.chain_keys(v, *B.largest(v["G_K"]), places["G_K"])]
    if "G_W_Q" in places:
        before["G_W_Q"] = [B.chain_weight_matrix(v, "Q", *B.largest(v["G_W_Q"]), places["G_W_Q"])]
    if "G_X" in places:  # an exercise stored before G_X left level 3
        before["G_X"] = [B.chain_inputs(v, *B.largest(v["G_X"]), places["G_X"])]
    steps = B.assemble(ex, before, [])
    return [_g_o_step(ex) if s.name == "G_O" else s for s in steps]


def aids(ex: Exercise) -> solutions.Aids:
    """No eˣ table (A is given): the shapes of the given matrices and √d_k."""
    return replace(solutions.generic_aids(ex), sqrt_dk=L.sqrt_dk(int(ex.given["d_k"])) if "G_scores" in ex.part_names
                   else None)


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    key = f"kind.backprop_loss.prompt_{min(ex.level, 3)}" if ex.level > 1 else "kind.backprop_loss.prompt"
    return (key + ("_v4" if ex.version <= 4 else ""),  # a stored exercise asks what its version asked
            "kind.backprop_loss.prompt_forward")


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"L = \tfrac{1}{2}\lVert O - T \rVert^2 \to G_X")
SHEET = SheetSection("backward", (
    Formula(r"L = \tfrac{1}{2} \sum_{i,c} (O_{ic} - T_{ic})^2, \qquad [[G_O | n | d_v]] = "
            r"\frac{\partial L}{\partial O} = O - T", "formulas.backprop_loss.loss"),
    Formula(r"X = \begin{bmatrix} 1 & 0 \\ 0 & 1 \\ 1 & 1 \end{bmatrix}, \quad W_Q = W_K = W_V = I_2: \quad "
            r"A \approx \begin{bmatrix} 1 & 0 & 0 \\ 0.330 & 0.670 & 0 \\ 0.248 & 0.248 & 0.503 \end{bmatrix}",
            "formulas.backprop_loss.example"),
), position=265)
