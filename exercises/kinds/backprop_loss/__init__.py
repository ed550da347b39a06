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

Built from admissible pieces (issue 14): level 2's X from the table of those whose rounded weights sum
to 1, level 3's forward pass the first of a small batch that does; then T drawn from the targets no cell
of O sits on whose backward pass passes every test (teaches every step, no tie, within the budget, every
guarded mistake apart from the answer, from each other and from what a careful student writes), tested
for several targets at once (_shared/chain_batch), so the draft handed to the engine is the one it keeps.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from attention_core import ops, self_attention

from ... import solutions
from ...core import budget, misconceptions, numbers, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import matrix, nonzero_matrix, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from .._shared import backward as B
from .._shared import chain_batch

ID = "backprop_loss"
ORDER = 275
VERSION = 2  # 2: constructive (issue 14): level 2's X from a table of the admissible ones, level 3's forward
# pass the first of a batch that passes, T from the admissible targets tested several at once (the engine's
# redraw and the rounding check answered for them: _shared/chain_batch); the 50,000-decision cache is gone
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
    if not _sums_to_one(A):
        return None  # the weights as given are a distribution: every rounded row sums to 1
    T = matrix(rng, O.shape, TARGETS)  # (n, d_v)
    if np.any(np.abs(O - T) < 1e-9):
        return None  # a cell of O on its target: its gradient is 0 whatever the sign
    given.update(A=A.copy(), O=O.copy(), T=T, d_k=int(X.shape[1]) if level < 3 else 2, causal=True)
    return given


_FORWARD: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # X → (A, O) at levels 1–2 (W_* = I): at most 3⁶ rows


def _sums_to_one(A: np.ndarray) -> bool:
    """np.allclose(A.sum(axis=1), 1.0, atol=1e-12) of finite weights (rtol 1e-5), written out: faster."""
    return bool((np.abs(A.sum(axis=1) - 1.0) <= 1e-12 + 1e-5).all())


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


def _forward_given(rng: np.random.Generator, level: int) -> dict | None:
    """The forward pass of a candidate as given (X, the weights, A and O to 2 decimals): level 1's is the
    notes' example, level 2's X is drawn from the table of those that pass (_level_two), level 3's the
    first of a batch of draws that passes (_level_three); None, rarely, when none of the batch does."""
    d = 2
    eye = np.eye(d)
    if level == 1:
        given = {"X": NOTES_X.copy(), "W_Q": eye, "W_K": eye.copy(), "W_V": eye.copy()}
    elif level == 2:
        table = _level_two()
        given = {"X": np.array(table[rng.integers(len(table))]), "W_Q": eye, "W_K": eye.copy(), "W_V": eye.copy()}
    else:
        given = _level_three(rng)
        if given is None:
            return None
    X = given["X"]
    A, O = _forward_of(level, X, given)  # the reference forward pass, as given
    if not _sums_to_one(A):
        return None  # (the batch's own test said it does: never, tests/test_kinds_backprop_loss_constructive.py)
    given.update(A=A.copy(), O=O.copy(), d_k=int(X.shape[1]) if level < 3 else 2, causal=True)
    return given


def _passing(X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray) -> np.ndarray:
    """Per candidate of a batch (B, n, d) with its weights (B, d, d): distinct token rows, and the
    causal forward pass's A to FORWARD_PLACES decimals sums to 1 in every row (as `forward` rounds it)."""
    n = X.shape[1]
    distinct = np.ones(len(X), dtype=bool)
    for i in range(n):
        for j in range(i):
            distinct &= (X[:, i] != X[:, j]).any(axis=1)
    Q, K = X @ W_Q, X @ W_K
    scaled = Q @ np.swapaxes(K, 1, 2) / np.sqrt(K.shape[2])  # (B, n, n)
    scaled = np.where(ops.hidden_cells(n), -np.inf, scaled)
    e = np.exp(scaled - scaled.max(axis=2, keepdims=True))
    A = round_half_up(e / e.sum(axis=2, keepdims=True), FORWARD_PLACES)
    return distinct & (np.abs(A.sum(axis=2) - 1.0) <= 1e-12).all(axis=1)


@functools.cache
def _level_two() -> np.ndarray:
    """Every X of level 2 (entries 0, 1, 2, no zero row or column, as nonzero_matrix draws them) whose
    tokens differ and whose rounded weights sum to 1 in every row, W_* = I: (count, 3, 2), read-only,
    found once with one batched forward pass (729 matrices, a few ms); each one's forward pass as given
    (_forward_of) is made then too."""
    values = np.asarray((0.0, 1.0, 2.0))
    n, d = TOKENS[2], 2
    grids = np.meshgrid(*([values] * (n * d)), indexing="ij")
    every = np.stack([g.ravel() for g in grids], axis=1).reshape(-1, n, d)
    every = every[numbers.no_zero_lines(every)]
    eye = np.broadcast_to(np.eye(d), (len(every), d, d))
    table = every[_passing(every, eye, eye, eye)]
    table.setflags(write=False)
    # every one's forward pass as given, made now (about 30 ms, once per process) and read by each draft:
    # else the first few hundred drafts of a process would each make their X's (about 0.4 ms)
    identity = {"W_Q": eye[0], "W_K": eye[0], "W_V": eye[0]}
    for X in table:
        _forward_of(2, X, identity)
    return table


LEVEL_THREE_BATCH = 8  # draws at once (about half pass)


def _level_three(rng: np.random.Generator) -> dict | None:
    """The first of a batch of level-3 draws (X of -1 … 2, the weights of -1, 0, 1, none with a zero
    row or column: numbers.pooled_matrices) that passes _passing, or None."""
    n, d, B = TOKENS[3], 2, LEVEL_THREE_BATCH
    X = numbers.pooled_matrices(rng, B, (n, d), (-1, 0, 1, 2))
    W = [numbers.pooled_matrices(rng, B, (d, d), (-1, 0, 1)) for _ in range(3)]
    ok = np.flatnonzero(_passing(X, *W))
    if not len(ok):
        return None
    b = ok[0]
    return {"X": np.array(X[b]), "W_Q": np.array(W[0][b]), "W_K": np.array(W[1][b]), "W_V": np.array(W[2][b])}


@functools.cache
def _targets() -> np.ndarray:
    """Every target T of TARGETS entries: (2⁶, n, d_v), read-only."""
    n, d_v = TOKENS[1], 2
    grids = np.meshgrid(*([np.asarray(TARGETS, dtype=float)] * (n * d_v)), indexing="ij")
    stack = np.stack([g.ravel() for g in grids], axis=1).reshape(-1, n, d_v)
    stack.setflags(write=False)
    return stack


def _off_target(O: np.ndarray) -> np.ndarray:
    """Per target of _targets(): no cell of O on its target (its gradient would be 0 whatever the sign)."""
    return (np.abs(O - _targets()) >= 1e-9).reshape(len(_targets()), -1).all(axis=1)


def _ties(refs) -> np.ndarray:
    """_tie per candidate of stacks (k, …): some cell a float's breadth from a half of the last place."""
    scaled = np.abs(np.concatenate([M.reshape(len(M), -1) for M in refs], axis=1)) * 100  # (k, cells)
    near = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    return (near & (scaled * 2 != np.round(scaled * 2))).any(axis=1)


def admissible(given: dict, level: int, which: np.ndarray, every: bool = False) -> dict[str, np.ndarray]:
    """_tested's verdicts alone."""
    return _tested(given, level, which, every)[0]


def _tested(given: dict, level: int, which: np.ndarray, every: bool = False) -> tuple[dict[str, np.ndarray], dict]:
    """(verdicts, {part: (k, …)} the references of every target tested, chain_batch.backward's).

    For the targets `which` (indices into _targets()) with the forward pass `given`, each test
    generate puts the variant to, as (k,) booleans (True: refused for that reason): a cell of O on its
    target, a step passing (almost) nothing back, a reference on a float's breadth from a tie, over
    the time budget (operations()), a guarded mistake not apart from the answer or another mistake
    (misconceptions.collides) or from what a careful student writes (apart_from_rounded). The budget,
    which refuses nothing at level 2 (over its whole space), is left out there unless `every`."""
    names = PARTS[level]
    backward = names[1:]  # G_O has no guarded mistake (the loss's own are diagnosed on it alone)
    X = given["X"]
    fwd = {**given, "Q": X @ given["W_Q"], "K": X @ given["W_K"], "V": X @ given["W_V"]}
    T = _targets()[which]
    G_O = given["O"] - T  # (k, n, d_v): ∂L/∂O
    ref, alt = chain_batch.backward(fwd, G_O, level == 3)
    refs = [ref[name] for name in names]
    mute = np.zeros(len(T), dtype=bool)
    if "G_scaled" in names:
        mute |= ~(np.abs(ref["G_scaled"]).reshape(len(T), -1) > 0.05).any(axis=1)
    if "G_X" in names:
        for g in ("G_Q", "G_K", "G_V"):
            mute |= ~(np.abs(ref[g]).reshape(len(T), -1) > 0.05).any(axis=1)
    found = {"on_target": (np.abs(G_O) < 1e-9).reshape(len(T), -1).any(axis=1), "mute": mute, "tie": _ties(refs)}
    separation = chain_batch.gap(spec(level).decimals)
    found["clash"] = chain_batch.clashes(ref, alt, backward, separation)
    found["rounding"] = chain_batch.near(chain_batch.careful(fwd, G_O, names, spec(level).decimals), alt,
                                         backward, separation)
    # every level-2 variant fits its budget (all 212 × 64 of them: tests/test_kinds_backprop_loss_constructive.py)
    if every or level != 2:
        extra = _forward_seconds(given, level)
        bound = chain_batch.bound_seconds(fwd, names, G_O.shape[2]) + extra  # over every target
        if not every and bound / 60.0 <= budget.BUDGET_MINUTES[level]:
            found["over_budget"] = np.zeros(len(T), dtype=bool)  # it fits (296 forward passes in 300)
        else:
            seconds = chain_batch.seconds(fwd, ref, names) + extra
            found["over_budget"] = seconds / 60.0 > budget.BUDGET_MINUTES[level]
    return found, ref


def _forward_seconds(given: dict, level: int) -> float:
    """What operations() counts besides the backward steps: the projections to V (and Q, K at level 3)
    and the subtraction O − T per cell."""
    X = given["X"]
    seconds = chain_batch.product_seconds(X, given["W_V"]) + budget.RATES["additions"] * int(np.size(given["O"]))
    if level == 3:
        seconds += chain_batch.product_seconds(X, given["W_Q"]) + chain_batch.product_seconds(X, given["W_K"])
    return seconds


CHUNK = 6  # targets tested at once, in a random order: the first that passes is drawn uniformly among those that do
MAX_CHUNKS = 1  # then a new forward pass: 1 in 8 at level 3 has no admissible target at all (a mistake alike
# whatever T is), and where they pass, 8 in 10 do: six failing are hardly ever a bad draw


@functools.cache
def _notes_targets() -> np.ndarray:
    """Level 1's forward pass is the notes' example: the targets that pass every test there, found
    once (64 candidates, one batch)."""
    given = _forward_given(np.random.default_rng(0), 1)  # level 1 draws nothing
    every = np.arange(len(_targets()))
    refused = np.logical_or.reduce(list(admissible(given, 1, every).values()))
    found = every[~refused]
    found.setflags(write=False)
    return found


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A forward pass (the notes' at level 1, drawn at levels 2 and 3), then its target T drawn from
    those that pass every test (admissible): the engine's redraw test and the rounding check answered
    for several targets at once, so the draft handed to the engine is the one it keeps."""
    for _ in range(MAX_TRIES):
        given = _forward_given(rng, level)
        if given is None:
            continue
        gradients = None
        if level == 1:
            options = _notes_targets()
            chosen = int(options[rng.integers(len(options))])
        else:
            off = np.flatnonzero(_off_target(given["O"]))  # the targets no cell of O sits on
            found = _first_admissible(given, level, off[rng.permutation(len(off))])
            if found is None:
                continue
            chosen, gradients = found
        given = {**given, "T": np.array(_targets()[chosen])}
        given = {k: given[k] for k in ("X", "W_Q", "W_K", "W_V", "A", "O", "T", "d_k", "causal")}
        env = pipeline.run(given) if gradients is None else references(given, gradients)
        parts = reference_parts(given, PARTS[level], spec(level).decimals, env)
        # the engine's redraw question, answered above for every target tried
        # (tests/test_kinds_backprop_loss_constructive.py holds it to misconceptions.collisions)
        return Draft(given=given, parts=parts, params={"n": given["X"].shape[0], "d_k": given["d_k"]}, env=env,
                     memo={("collides", GUARDS): False})
    raise RuntimeError(f"backprop_loss: no variant within the time budget in {MAX_TRIES} draws")


def _first_admissible(given: dict, level: int, order: np.ndarray) -> tuple[int, dict] | None:
    """The first target in `order` that passes every test of admissible(), a few at a time, with its
    references ({part: value}, chain_batch.backward's), or None."""
    return chain_batch.first_admissible(lambda which: _tested(given, level, which), order, CHUNK, MAX_CHUNKS)


def references(given: dict, gradients: dict) -> dict:
    """pipeline.run(given) from the backward pass already worked out (`gradients`: chain_batch.backward's
    references, G_O = O − T among them) and the forward steps the pipeline computes from what is given
    (X W_Q, X W_K, X W_V, S = Q Kᵀ, S / √d_k, the mask; A and O are given, so are not recomputed; G_V W_Vᵀ,
    a step of its own; at level 2 also G_W_* = Xᵀ G_* and G_X, which it does not ask): its own operations
    on the same values, bit for bit (tested)."""
    Q, K, V = (ops.project(given["X"], given[w]) for w in ("W_Q", "W_K", "W_V"))
    S = ops.scores(Q, K)
    scaled = ops.scale(S, int(given["d_k"]))
    env = {**given, "Q": Q, "K": K, "V": V, "scores": S, "scaled": scaled, "masked": ops.apply_mask(scaled, True),
           **gradients}
    for name in ("G_scaled", "G_scores"):  # the hidden keys' cells as the mask's backward step writes them: +0.0
        if name in gradients:
            env[name] = ops.apply_mask_backward(gradients[name], True)
    X = given["X"]
    if "G_X" not in gradients:  # level 2 asks down to G_scores, the pipeline goes on to G_X
        for g in ("Q", "K", "V"):
            env[f"G_W_{g}"] = X.T @ env[f"G_{g}"]
    env["G_X_V"] = env["G_V"] @ given["W_V"].T
    if "G_X" not in gradients:
        env["G_X"] = env["G_Q"] @ given["W_Q"].T + env["G_K"] @ given["W_K"].T + env["G_X_V"]
    return env


def operations(ex: Exercise):
    """The registry's count from what is given, plus one subtraction per cell of G_O = O − T."""
    return _operations(ex)


def _operations(ex: Exercise, env: dict | None = None):
    """operations(ex), counted from `env` (the pipeline's values of ex.given) when the caller has them."""
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
