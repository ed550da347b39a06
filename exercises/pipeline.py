"""Attention as a table of named steps, so that any exercise can be computed from whatever it gives.

Each step names its output, its inputs and a function of the values so far. Run from an exercise's
given matrices it yields every reference answer (through attention_core's own steps); run with a set
of *mistakes* it yields the wrong answers of the misconception catalog; run on a learner's own earlier
values it yields what a later step should be "consistent with" (errors carried forward).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attention_core import causal_mask, ops
from attention_core.embedding import embed, embed_backward


class Env(dict):
    """Values by name, plus the mistakes to make and a record of which ones changed something."""

    def __init__(self, values, mistakes: Iterable[str] = ()):
        super().__init__(values)
        self.mistakes = frozenset(mistakes)
        self.used: set[str] = set()  # the mistakes actually made
        self.tainted: set[str] = set()  # the values they changed, directly or downstream
        self.current: str | None = None  # the step being computed

    def wrong(self, mistake: str, applies: bool = True) -> bool:
        """Should this step make `mistake`? Records it when it does and it can matter."""
        if mistake in self.mistakes and applies:
            self.used.add(mistake)
            if self.current:
                self.tainted.add(self.current)
            return True
        return False


@dataclass(frozen=True)
class Step:
    output: str
    inputs: tuple[str, ...]
    compute: Callable[[Env], np.ndarray]


def _d_k(env: Env) -> int:
    return int(env["d_k"])


# ---------------------------------------------------------------- forward steps

def _q(env):
    return ops.project(env["X"], env["W_Q"])


def _k(env):
    return ops.project(env["X"], env["W_K"])


def _v(env):
    return ops.project(env["X"], env["W_V"])


def _scores(env):
    Q, K = env["Q"], env["K"]
    if env.wrong("transposed_scores"):
        return ops.scores(K, Q)  # K Qᵀ: rows and columns swapped
    if env.wrong("scores_not_transposed", applies=Q.shape[1] == K.shape[0]):
        return Q @ K  # (n, d_k) @ (n, d_k): only conformable when d_k = n
    return ops.scores(Q, K)


def _scaled(env):
    S, d_k = env["scores"], _d_k(env)
    if env.wrong("no_scaling", applies=d_k != 1):
        return np.array(S, dtype=float)
    if env.wrong("scaled_by_dk", applies=d_k not in (0, 1)):
        return S / d_k
    return ops.scale(S, d_k)


def _masked(env):
    scaled, n = env["scaled"], env["scaled"].shape[0]
    causal = bool(env.get("causal", False))
    if not causal:
        return ops.apply_mask(scaled, False)
    out = np.array(scaled, dtype=float)
    if env.wrong("no_mask"):
        return out
    if env.wrong("mask_diagonal"):
        out[np.triu(np.ones((n, n), dtype=bool), k=0)] = -np.inf
        return out
    if env.wrong("mask_wrong_triangle"):
        out[np.tril(np.ones((n, n), dtype=bool), k=-1)] = -np.inf
        return out
    if env.wrong("mask_zero_instead_of_inf", applies=n > 1):
        out[causal_mask(n)] = 0.0  # a 0 still gets e^0 = 1 in the softmax
        return out
    return ops.apply_mask(scaled, True)


def _softmax_rows(env):
    z = env["masked"]
    causal = bool(env.get("causal", False))
    if env.wrong("softmax_columns"):
        with np.errstate(invalid="ignore"):
            return ops.softmax(z, axis=0)
    if env.wrong("no_exp"):
        finite = np.where(np.isfinite(z), z, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return finite / finite.sum(axis=1, keepdims=True)
    if env.wrong("softmax_no_normalise"):
        return np.exp(z)  # e^z, never divided by the row's sum
    if env.wrong("mask_zero_instead_of_inf", applies=bool(np.isneginf(z).any())):
        return ops.softmax(np.where(np.isneginf(z), 0.0, z), axis=-1)  # the given −∞ read as 0
    if causal and "scaled" in env and env.wrong("mask_after_softmax"):
        A = ops.softmax(env["scaled"], axis=-1)  # softmax over every key, the future included,
        A[causal_mask(A.shape[0])] = 0.0  # then future weights zeroed without renormalising
        return A
    with np.errstate(invalid="ignore"):
        return ops.softmax(z, axis=-1)


def _output(env):
    A, V = env["A"], env["V"]
    if env.wrong("weights_transposed", applies=A.shape[0] == A.shape[1]):
        return ops.weighted_sum(A.T, V)  # only conformable with as many queries as keys
    return ops.weighted_sum(A, V)


def _embedding(env):
    return embed(env["token_ids"], env["E"])


# ---------------------------------------------------------------- backward steps

def _g_a(env):
    G_O, V = env["G_O"], env["V"]
    if env.wrong("grad_a_transposed"):
        return V @ G_O.T  # (n, d_v) @ (d_v, n)
    if env.wrong("grad_a_no_transpose", applies=G_O.shape[1] == V.shape[0]):
        return G_O @ V  # (n, d_v) @ (n, d_v): only conformable when d_v = n
    return ops.weighted_sum_backward(env["A"], env["V"], env["G_O"])[0]


def _g_v(env):
    A = env["A"]
    if env.wrong("grad_v_no_transpose", applies=A.shape[0] == A.shape[1]):
        return A @ env["G_O"]  # only conformable with as many queries as keys
    return ops.weighted_sum_backward(env["A"], env["V"], env["G_O"])[1]


def _g_scaled(env):
    A, G_A = env["A"], env["G_A"]
    if env.wrong("softmax_grad_missing_term"):
        G = A * G_A
    elif env.wrong("softmax_grad_diagonal_only"):
        G = A * (1 - A) * G_A  # only ∂a_j/∂z_j = a_j (1 − a_j): the other weights' paths dropped
    elif env.wrong("softmax_grad_sign"):
        G = A * (np.sum(A * G_A, axis=-1, keepdims=True) - G_A)  # the bracket the wrong way round
    else:
        G = ops.softmax_backward(A, G_A)
    return ops.apply_mask_backward(G, bool(env.get("causal", False)))


def _g_scores(env):
    if env.wrong("grad_scores_no_scale", applies=_d_k(env) != 1):
        return np.array(env["G_scaled"], dtype=float)
    return ops.scale_backward(env["G_scaled"], _d_k(env))


def _g_q(env):
    if env.wrong("grad_q_transposed"):
        return env["G_scores"].T @ env["K"]
    return ops.scores_backward(env["Q"], env["K"], env["G_scores"])[0]


def _g_k(env):
    if env.wrong("grad_k_no_transpose"):
        return env["G_scores"] @ env["Q"]
    return ops.scores_backward(env["Q"], env["K"], env["G_scores"])[1]


def _g_w(x_name, g_name):
    def compute(env):
        return env[x_name].T @ env[g_name]  # Xᵀ G
    return compute


def _g_x_v(env):
    return env["G_V"] @ env["W_V"].T  # the value path's share of G_X: G_V W_Vᵀ


def _g_x(env):
    # X feeds Q, K and V, so its gradient adds the three paths
    return env["G_Q"] @ env["W_Q"].T + env["G_K"] @ env["W_K"].T + _g_x_v(env)


def _g_e(env):
    ids, E = env["token_ids"], env["E"]
    if env.wrong("embedding_grad_no_accumulate", applies=len(set(np.asarray(ids).tolist())) < len(ids)):
        G_E = np.zeros(np.shape(E))
        G_E[np.asarray(ids, dtype=int)] = env["G_X"]  # fancy assignment keeps only the last repeat
        return G_E
    return embed_backward(ids, env["G_X"], np.shape(E)[0])


STEPS: tuple[Step, ...] = (
    Step("X", ("token_ids", "E"), _embedding),
    Step("Q", ("X", "W_Q"), _q),
    Step("K", ("X", "W_K"), _k),
    Step("V", ("X", "W_V"), _v),
    Step("scores", ("Q", "K"), _scores),
    Step("scaled", ("scores", "d_k"), _scaled),
    Step("masked", ("scaled",), _masked),
    Step("A", ("masked",), _softmax_rows),
    Step("O", ("A", "V"), _output),
    Step("G_A", ("G_O", "V"), _g_a),
    Step("G_V", ("A", "G_O"), _g_v),
    Step("G_scaled", ("A", "G_A"), _g_scaled),
    Step("G_scores", ("G_scaled", "d_k"), _g_scores),
    Step("G_Q", ("G_scores", "K"), _g_q),
    Step("G_K", ("G_scores", "Q"), _g_k),
    Step("G_W_Q", ("X", "G_Q"), _g_w("X", "G_Q")),
    Step("G_W_K", ("X", "G_K"), _g_w("X", "G_K")),
    Step("G_W_V", ("X", "G_V"), _g_w("X", "G_V")),
    Step("G_X_V", ("G_V", "W_V"), _g_x_v),
    Step("G_X", ("G_Q", "W_Q", "G_K", "W_K", "G_V", "W_V"), _g_x),
    Step("G_E", ("token_ids", "G_X", "E"), _g_e),
)
STEP_BY_NAME = {s.output: s for s in STEPS}


def _downstream(names: set[str]) -> set[str]:
    """`names` and every value computed (directly or not) from them."""
    out = set(names)
    for step in STEPS:
        if out.intersection(step.inputs):
            out.add(step.output)
    return out


def _mistakes_of(step: Step) -> set[str]:
    """The mistakes a step can make: the ids it asks env.wrong about, read from its source."""
    return set(re.findall(r'env\.wrong\(\s*"(\w+)"', inspect.getsource(step.compute)))


# mistake id -> the values it can change: the steps that make it and everything after them
AFFECTED: dict[str, frozenset[str]] = {}
for _step in STEPS:
    for _mistake in _mistakes_of(_step):
        AFFECTED[_mistake] = frozenset(AFFECTED.get(_mistake, frozenset()) | _downstream({_step.output}))


def run(given: dict, mistakes: Iterable[str] = (), until: Iterable[str] | None = None) -> Env:
    """Every value computable from `given`, in step order. Given values are never recomputed."""
    env = Env({k: v for k, v in given.items()}, mistakes)
    wanted = set(until) if until is not None else None
    for step in STEPS:
        if step.output in env or not all(name in env for name in step.inputs):
            continue
        env.current = step.output
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            env[step.output] = np.asarray(step.compute(env), dtype=float)
        if env.tainted.intersection(step.inputs):
            env.tainted.add(step.output)
        if wanted is not None and wanted <= env.keys():
            break
    return env


def reference_env(ex: Any) -> dict[str, np.ndarray]:
    """Every value of an exercise computed from its given data, memoised on the (immutable) exercise."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "reference_env" not in memo:
        memo["reference_env"] = dict(run(ex.given))
    return memo["reference_env"]


def run_mistake(given: dict, reference: dict, mistake: str, until: Iterable[str] | None = None) -> Env:
    """run(given, {mistake}) that recomputes only what the mistake can change: everything upstream of
    the steps making it is taken from `reference` (the mistake-free run of the same given data)."""
    affected = AFFECTED.get(mistake, frozenset())
    start = {k: v for k, v in reference.items() if k not in affected}
    start.update(given)  # given values are never recomputed
    return run(start, mistakes={mistake}, until=until)


def recompute(name: str, values: dict) -> np.ndarray | None:
    """Step `name` applied to `values` (for errors carried forward), or None if inputs are missing."""
    step = STEP_BY_NAME.get(name)
    if step is None or not all(k in values for k in step.inputs):
        return None
    env = Env(values)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        try:
            return np.asarray(step.compute(env), dtype=float)
        except (ValueError, IndexError):  # a learner's earlier value of a shape that cannot combine
            return None
