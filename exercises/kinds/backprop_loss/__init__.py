"""Backpropagation from a loss: the worked example of the seed notes, with a target T.

    X = [[1, 0], [0, 1], [1, 1]],  W_Q = W_K = W_V = I₂,  causal,  L = ½‖O − T‖²

The forward pass is given as the notes state it, rounded to 2 decimals as every prompt asks (the
notes' A ≈ [[1, 0, 0], [0.330, 0.670, 0], [0.248, 0.248, 0.503]] is given as [[1, 0, 0], [0.33, 0.67, 0],
[0.25, 0.25, 0.50]]: each row still sums to 1, and a variant where a rounded row does not is drawn again);
the learner starts the backward pass from the loss,

    G_O = ∂L/∂O = O − T,  then G_A = G_O Vᵀ, G_V = Aᵀ G_O, G_Z = A ⊙ (G_A − rowsum(A ⊙ G_A)),
    G_S = G_Z / √d_k, G_Q = G_S K, G_K = G_Sᵀ Q, G_W_* = Xᵀ G_*, G_X = G_Q W_Qᵀ + G_K W_Kᵀ + G_V W_Vᵀ

and every gradient is computed from exactly the numbers shown. Level 1 is the notes' example itself
(T drawn, G_O, G_A, G_V); level 2 draws X around it (G_O down to G_S); level 3 draws the weights too and
goes down to G_W_Q, G_W_K, G_W_V and G_X (within 25 minutes). The mistakes of the loss: the
sign of O − T, and the ½ forgotten (2(O − T)).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attention_core import self_attention

from ... import solutions
from ...core import misconceptions, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import matrix, nonzero_matrix, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from .._shared.apart import apart_from_rounded

ID = "backprop_loss"
ORDER = 275
VERSION = 1
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("grad_a_transposed", "grad_v_no_transpose",
          "softmax_grad_missing_term", "softmax_grad_diagonal_only", "softmax_grad_sign", "grad_scores_no_scale",
          "grad_scores_times_sqrt_dk", "grad_k_no_transpose", "grad_q_transposed", "grad_x_no_value_path",
          "grad_x_no_key_path", "grad_x_no_query_path", "grad_x_query_path_only", "grad_x_key_path_only",
          "grad_x_value_path_only")
# the loss's own mistakes, named on G_O only (downstream T − O is the softmax's sign mistake, and 2(O − T)
# is √d_k's at d_k = 2): no cell of G_O is 0, so both differ from O − T in every cell
LOSS_MISTAKES = ("loss_grad_sign", "loss_grad_doubled")

NOTES_X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (3, 2): the seed notes' three tokens
FORWARD_PLACES = 2  # A and O are given as a careful student writes them (the notes' 0.330 … to 2 decimals)
PARTS = {1: ["G_O", "G_A", "G_V"],
         2: ["G_O", "G_A", "G_V", "G_scaled", "G_scores"],
         3: ["G_O", "G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K", "G_W_Q", "G_W_K", "G_W_V", "G_X"]}
TOKENS = {1: 3, 2: 3, 3: 3}
TARGETS = (0, 1)  # entries of T
MAX_TRIES = 2000


def forward(X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A and O of the causal forward pass, to FORWARD_PLACES decimals as they are given."""
    tr = self_attention(X, W_Q, W_K, W_V, causal=True)
    return round_half_up(tr.A, FORWARD_PLACES), round_half_up(tr.O, FORWARD_PLACES)


def _inputs(rng: np.random.Generator, level: int) -> dict:
    d = 2
    eye = np.eye(d)
    if level == 1:
        return {"X": NOTES_X.copy(), "W_Q": eye, "W_K": eye.copy(), "W_V": eye.copy()}
    n = TOKENS[level]
    X = nonzero_matrix(rng, (n, d), (0, 1, 2) if level == 2 else (-1, 0, 1, 2))  # (n, d)
    if level == 2:
        return {"X": X, "W_Q": eye, "W_K": eye.copy(), "W_V": eye.copy()}
    return {"X": X, **{w: nonzero_matrix(rng, (d, d), (-1, 0, 1)) for w in ("W_Q", "W_K", "W_V")}}


def _drawn(rng: np.random.Generator, level: int) -> dict | None:
    """The random part of a candidate (every draw from the generator it takes, in order) with its
    forward pass as given, or None when a cheap check refuses it already."""
    given = _inputs(rng, level)
    X = given["X"]
    if len({tuple(x) for x in X.tolist()}) < X.shape[0]:
        return None  # two equal tokens: their gradients cannot be told apart
    A, O = _forward_of(level, X, given)
    if not np.allclose(A.sum(axis=1), 1.0, atol=1e-12):
        return None  # the weights as given are a distribution: every rounded row sums to 1
    T = matrix(rng, O.shape, TARGETS)  # (n, d_v)
    if np.any(np.abs(O - T) < 1e-9):
        return None  # a cell of O on its target: its gradient is 0 whatever the sign
    given.update(A=A.copy(), O=O.copy(), T=T, d_k=int(X.shape[1]) if level < 3 else 2, causal=True)
    return given


_FORWARD: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # X → (A, O) at levels 1–2 (W_* = I): at most 3⁶ rows


def _forward_of(level: int, X: np.ndarray, given: dict) -> tuple[np.ndarray, np.ndarray]:
    """forward(X, W_Q, W_K, W_V), remembered by X where the weights are the identity (levels 1 and 2)."""
    if level == 3:
        return forward(X, given["W_Q"], given["W_K"], given["W_V"])
    key = X.tobytes()
    if key not in _FORWARD:
        _FORWARD[key] = forward(X, given["W_Q"], given["W_K"], given["W_V"])
    return _FORWARD[key]


def _draft(rng: np.random.Generator, level: int) -> tuple[Draft, dict] | None:
    """A candidate variant and the pipeline's values of it (the budget counts from them), or None."""
    given = _drawn(rng, level)
    return None if given is None else _built(given, level)


def _built(given: dict, level: int) -> tuple[Draft, dict] | None:
    """The draft of a drawn candidate and the pipeline's values of it, or None when it teaches too little."""
    env = pipeline.run(given, until=PARTS[level])
    parts = reference_parts(given, PARTS[level], spec(level).decimals, env)
    ref = {p.name: p.reference for p in parts}
    if "G_scaled" in ref and not np.any(np.abs(ref["G_scaled"]) > 0.05):
        return None  # the softmax passes (almost) nothing back: nothing to see
    if any(_tie(r) for r in ref.values()):
        return None  # a value exactly halfway between two 2-decimal numbers: shown and rounded alike nowhere
    if "G_X" in ref and not all(np.any(np.abs(ref[g]) > 0.05) for g in ("G_Q", "G_K", "G_V")):
        return None
    return Draft(given=given, parts=parts, params={"n": given["X"].shape[0], "d_k": given["d_k"]}), env


def _tie(M: np.ndarray) -> bool:
    """Some cell at a half of the last place (x.xx5) that the float misses by a hair (1.108 − 1.663 =
    −0.55499…): rounded half up, the exact value and the float then differ, and so would the solution's
    lines and its matrix. A tie the float holds exactly (0.375) rounds the same either way."""
    scaled = np.abs(np.asarray(M, dtype=float)) * 100
    near = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    return bool(np.any(near & (scaled * 2 != np.round(scaled * 2))))


def generate(rng: np.random.Generator, level: int) -> Draft:
    """The first candidate within the time budget whose guarded mistakes stay apart from the answer as
    a careful student rounds it, and apart from the exact answer and from each other (what the
    engine's redraw asks, misconceptions.collisions: checked here on the mistakes' values computed
    once, so a variant it would refuse costs no second draft and no second run of its mistakes; the
    engine's redraw would take the next candidate from the same generator, as this loop does)."""
    from ...core import budget, engine

    for _ in range(MAX_TRIES):
        ex = None  # the exercise this candidate is checked on, if it is (its memo goes to the engine)
        given = _drawn(rng, level)
        if given is None:
            continue
        key = _key(given, level)
        if _DECIDED.get(key) is False:
            continue  # refused before: the same drawn values decide the same way
        found = _built(given, level)
        if found is None:
            ok = False
        elif _DECIDED.get(key):
            ok = True
        else:
            draft, env = found
            ex = Exercise(kind=ID, seed=0, level=level, version=VERSION, given=draft.given,
                          parts=tuple(draft.parts), params=draft.params)
            ok = _operations(ex, env).minutes <= budget.BUDGET_MINUTES[level]
            if ok:
                by_part = misconceptions.by_part(ex, GUARDS)
                # the engine's test here too where it refuses variants (level 3: 1 in 12) or is decided
                # once (level 1, remembered); level 2's variants pass it: the engine's own check is enough
                ok = apart_from_rounded(ex, GUARDS, engine.default_chain) and (
                    level == 2 or not misconceptions.clash_by_part(misconceptions.parts_by_name(ex), by_part))
        if key is not None and len(_DECIDED) < MAX_DECIDED:
            _DECIDED[key] = ok
        if ok:
            return found[0] if ex is None else replace(found[0], memo=ex.__dict__.get("_memo"))
    raise RuntimeError(f"backprop_loss: no variant within the time budget in {MAX_TRIES} draws")


MAX_DECIDED = 50_000  # levels 1–2 draw X from at most 3⁶ matrices and T from 2⁶: every candidate fits


_DECIDED: dict[bytes, bool] = {}  # (level, X, T) → whether generate takes that candidate, at levels 1–2


def _key(given: dict, level: int) -> bytes | None:
    """What decides a candidate of levels 1 and 2 (the weights are I there): its level, X and T; None
    at level 3, whose drawn weights make a repeat too rare to remember."""
    if level == 3:
        return None
    return bytes([level]) + given["X"].tobytes() + given["T"].tobytes()


def operations(ex: Exercise):
    """The registry's count from what is given, plus one subtraction per cell of G_O = O − T."""
    return _operations(ex)


def _operations(ex: Exercise, env: dict | None = None):
    """operations(ex), counted from `env` (the pipeline's values of ex.given) when the caller has them."""
    from ...core import budget

    names = ex.part_names
    return budget.count(ex.given, names, env) + budget.Operations(additions=int(np.size(ex.given["O"])))


def loss_mistakes(ex: Exercise) -> dict[str, np.ndarray]:
    """{id: the G_O that mistake gives}: T − O (the sign) and 2(O − T) (the ½ forgotten)."""
    G_O = np.asarray(ex.given["O"], dtype=float) - np.asarray(ex.given["T"], dtype=float)  # (n, d_v)
    return {"loss_grad_sign": -G_O, "loss_grad_doubled": 2 * G_O}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """The loss's own mistakes on G_O; every other part is left to the catalog."""
    if part.name != "G_O":
        return None
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    return next((mid for mid, alt in loss_mistakes(ex).items() if misconceptions.matches(value, alt, tolerance)),
                None)


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
    from .._shared import backward as B

    v = B.values_of(ex)
    places = {p.name: p.decimals for p in ex.parts}
    before = {"G_A": [B.chain_weights(v, *B.largest(v["G_A"]), places["G_A"])],
              "G_V": [B.chain_values(v, *B.largest(v["G_V"]), places["G_V"])]}
    if "G_scaled" in places:
        before["G_scaled"] = [B.jacobian(v, B.widest_row(v["A"]), places["G_scaled"])]
        before["G_scores"] = [B.scale(v, *B.largest(v["G_scaled"]), places["G_scores"])]
    if "G_X" in places:
        before["G_Q"] = [B.chain_queries(v, *B.largest(v["G_Q"]), places["G_Q"])]
        before["G_K"] = [B.chain_keys(v, *B.largest(v["G_K"]), places["G_K"])]
        before["G_W_Q"] = [B.chain_weight_matrix(v, "Q", *B.largest(v["G_W_Q"]), places["G_W_Q"])]
        before["G_X"] = [B.chain_inputs(v, *B.largest(v["G_X"]), places["G_X"])]
    steps = B.assemble(ex, before, [])
    return [_g_o_step(ex) if s.name == "G_O" else s for s in steps]


def aids(ex: Exercise) -> solutions.Aids:
    """No eˣ table (A is given): the shapes of the given matrices and √d_k."""
    return replace(solutions.generic_aids(ex), sqrt_dk=L.sqrt_dk(int(ex.given["d_k"])) if "G_scores" in ex.part_names
                   else None)


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    return (f"kind.backprop_loss.prompt_{min(ex.level, 3)}" if ex.level > 1 else "kind.backprop_loss.prompt",
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
