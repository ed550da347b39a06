"""The step registry: every step of attention, forward and backward, as one record.

A record holds everything the rest of the package knows about a step: its name and inputs, the right
computation (attention_core's own), the catalogued mistakes a learner makes there (each a named
alternative computation with the condition under which it can be told apart), its exact rule on
sympy numbers, its symbol and formula in LaTeX and in Typst, the sanity rules its values obey, and
its shape in named axes. The pipeline, the worked solutions, the answer keys, check my work, the
sanity checks and the formula sheet all read these records.

Axes (rectangular-ready: self-attention is the case n_q = n_k = n):
    n_q      query tokens (rows of Q, scores, A, O)
    n_k      key/value tokens (rows of K and V, columns of scores and A)
    n        tokens of X when it feeds queries and keys alike (self-attention)
    d_model  width of X and of the embedding table E
    d_k      width of queries and keys
    d_v      width of values and of the output
    vocab    rows of the embedding table E

    Q = X W_Q                  # (n_q, d_k)
    S = Q Kᵀ                   # (n_q, n_k)
    Z = S / √d_k               # (n_q, n_k)
    A = softmax(Z̃) row-wise    # (n_q, n_k)
    O = A V                    # (n_q, d_v)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import Any

import numpy as np
import sympy

from attention_core import alibi, block, causal_mask, linear, ops
from attention_core import online_softmax as online
from attention_core.embedding import embed, embed_backward
from attention_core.ops import padding_mask as _padding_mask
from attention_core.ops import softmax_visible as _softmax_visible
from attention_core.temperature import soft_cap
from attention_core.windows import window_mask

from . import exact
from . import operations as count
from .numbers import EXP_PLACES, round_half_up
from .reach import Reach, over_root, softmax_by_hand, written

Values = Mapping[str, Any]  # the values computed so far, by name
Compute = Callable[[Values], np.ndarray]

AXES: dict[str, str] = {
    "n_q": "query tokens", "n_k": "key and value tokens", "n": "tokens (self-attention: n_q = n_k = n)",
    "d_model": "width of X and E", "d_k": "width of queries and keys", "d_v": "width of values and outputs",
    "vocab": "rows of the embedding table", "1": "a single column (a sum over the tokens)",
    "d_c": "width of the cached latent (MLA)", "heads": "heads asked (ALiBi's slopes)",
}


def _always(env: Values) -> bool:
    return True


@dataclass(frozen=True)
class Mistake:
    """A catalogued wrong computation of one step (its explanation: message misconception.<id>).

    applies: can the mistake be made here and give something else (a conformable product, d_k ≠ 1 …); on
    a stack of candidates a condition on the values answers per candidate, one flag each."""

    id: str
    compute: Compute
    applies: Callable[[Values], bool] = _always


@dataclass(frozen=True)
class Product:
    """out = L' R' with L' = Lᵀ when left_t and R' = Rᵀ when right_t."""

    left: str
    right: str
    left_t: bool = False
    right_t: bool = False


@dataclass(frozen=True)
class AttentionStep:
    """One step of attention. Mistakes are listed in precedence order: when several are asked for and
    apply, the first one listed is the one made."""

    name: str
    inputs: tuple[str, ...]
    compute: Compute  # the right computation
    shape: tuple[str, str]  # named axes (AXES)
    symbol: str  # LaTeX (exercises.rendering.latex notation)
    formula_latex: str  # the whole formula in LaTeX: S = Q K^{\top}
    typst_symbol: str
    typst_formula: str
    builder: str  # which worked-solution builder shows it (exercises.solutions.builders)
    direction: str  # "forward" or "backward"
    mistakes: tuple[Mistake, ...] = ()
    exact: Callable[[dict, Values], Any] | None = None  # (exact values so far, reference values) -> object array
    product: Product | None = None  # the matrix product it is, if it is one
    scales: str | None = None  # the value it divides by √d_k, if it does
    sanity: tuple[str, ...] = ()  # the sanity rules its values obey (exercises.core.sanity)
    checkable: bool = True  # a step a learner can claim in check my work
    # its hand work (exercises.core.operations): (the record, the values) -> Operations, or None where the value
    # is read off (a product by I, a division by √1); count None: the step only copies
    count: Callable[[Any, Values], Any] | None = None
    # other inputs that make the same value (the additive mask M: from padding flags, or from a window): the
    # step runs on the first of `inputs` and these whose names are all there
    or_inputs: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_input_sets", tuple(frozenset(n) for n in (self.inputs, *self.or_inputs)))

    def runs_on(self, have: Set[str]) -> frozenset[str] | None:
        """The inputs the step reads from the values `have` (a set, or a dict's keys), or None when it cannot run."""
        for names in self._input_sets:
            if names <= have:
                return names
        return None

    @property
    def output(self) -> str:
        """The value the step computes (its name)."""
        return self.name

    @property
    def mistake_ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.mistakes)

    @property
    def title_key(self) -> str:
        return f"solution.step.{self.name}"

    @property
    def note_key(self) -> str:
        return f"solution.note.{self.name}"

    @property
    def label_key(self) -> str:
        return f"part.{self.name}"

    def mistake(self, wanted: frozenset[str] | set[str], env: Values) -> Mistake | None:
        """The mistake this step makes for the `wanted` ids on these values, or None."""
        for m in self.mistakes:
            if m.id in wanted and np.any(m.applies(env)):  # on a stack: where it applies to some candidate
                return m
        return None


def _d_k(env: Values) -> int:
    return int(env["d_k"])


def _causal(env: Values) -> bool:
    return bool(env.get("causal", False))


def _square(name: str) -> Callable[[Values], bool]:
    return lambda env: env[name].shape[-2] == env[name].shape[-1]


# ---------------------------------------------------------------- exact rules


def _exact_product(p: Product) -> Callable[[dict, Values], Any]:
    def rule(xs: dict, values: Values):
        left, right = xs[p.left], xs[p.right]
        return exact.xmatmul(left.T if p.left_t else left, right.T if p.right_t else right)
    return rule


def _exact_scale(src: str) -> Callable[[dict, Values], Any]:
    return lambda xs, values: exact.xscale(xs[src], xs.get("d_k"))


def _exact_mask(xs: dict, values: Values):
    return exact.upper(xs["scaled"], -sympy.oo) if _causal(values) else xs["scaled"].copy()


def _exact_softmax(xs: dict, values: Values):
    return exact.xsoftmax(xs["masked"])


def _exact_softmax_backward(xs: dict, values: Values):
    out = exact.xsoftmax_backward(xs["A"], xs["G_A"])
    return exact.upper(out, sympy.Integer(0)) if _causal(values) else out


G_X_PATHS = (("G_Q", "W_Q"), ("G_K", "W_K"), ("G_V", "W_V"))  # X feeds Q, K and V


def _exact_g_x(xs: dict, values: Values):
    return exact.xadd(*[exact.xmatmul(xs[g], xs[w].T) for g, w in G_X_PATHS])


def _exact_embedding(xs: dict, values: Values):
    return xs["E"][np.asarray(values["token_ids"], dtype=int)]


def _exact_embedding_grad(xs: dict, values: Values):
    out = np.full(np.shape(values["E"]), sympy.Integer(0), dtype=object)  # (vocab, d_model)
    for p, tok in enumerate(np.asarray(values["token_ids"], dtype=int)):
        for j in range(out.shape[1]):
            out[tok, j] = exact.xsum([out[tok, j], xs["G_X"][p, j]])
    return out


# ---------------------------------------------------------------- forward: embedding and projections


def _embedding(env):
    return embed(env["token_ids"], env["E"])  # (n, d_model): row p is E[t_p]


def _tokens(env: Values) -> np.ndarray:
    """What the projections read: the normalised rows X_norm in an attention block, else X itself."""
    return env["X_norm"] if "X_norm" in env else env["X"]


def _exact_tokens(xs: dict, values: Values) -> Any:
    return xs["X_norm"] if "X_norm" in values else xs["X"]


def _projection(name: str, weight: str, shape: tuple[str, str]) -> AttentionStep:
    product = Product("X", weight)
    return AttentionStep(
        name, ("X", weight), lambda env: ops.project(_tokens(env), env[weight]), shape=shape,
        symbol=name, formula_latex=f"{name} = X {weight}", typst_symbol=name,
        typst_formula=f"{name} = X {weight}", builder="product", direction="forward",
        exact=lambda xs, values: exact.xmatmul(_exact_tokens(xs, values), xs[weight]), product=product,
        count=lambda step, env: count.product_unless_identity(_tokens(env), env[weight]))


# ---------------------------------------------------------------- forward: scores, scaling, mask


def _scores(env):
    return ops.scores(env["Q"], env["K"])  # (n_q, d_k) @ (d_k, n_k) -> (n_q, n_k)


SCORES_MISTAKES = (
    Mistake("transposed_scores", lambda env: ops.scores(env["K"], env["Q"])),  # K Qᵀ: rows and columns swapped
    # Q K without the transpose: only conformable when d_k = n_k
    Mistake("scores_not_transposed", lambda env: env["Q"] @ env["K"],
            applies=lambda env: env["Q"].shape[-1] == env["K"].shape[-2]),
)


def _reach(env: Values) -> Reach | None:
    """The careful student's writer when the run measures their reach (pipeline.run's rounding), else None."""
    rounding = getattr(env, "rounding", None)
    return rounding if isinstance(rounding, Reach) else None


def _scaled(env):
    return over_root(env["scores"], _d_k(env), getattr(env, "rounding", None))


def _d_model(env: Values) -> int | None:
    """The width of X (the rows of W_Q), when the values reach back that far."""
    if "W_Q" in env:
        return int(np.shape(env["W_Q"])[-2])
    return int(np.shape(env["X"])[-1]) if "X" in env else None


def _scaled_by_d_model(env):
    return env["scores"] / np.sqrt(_d_model(env))  # √d_model, the width of X, in place of √d_k


SCALED_MISTAKES = (
    Mistake("no_scaling", lambda env: np.array(env["scores"], dtype=float), applies=lambda env: _d_k(env) != 1),
    Mistake("scaled_by_dk", lambda env: env["scores"] / _d_k(env), applies=lambda env: _d_k(env) not in (0, 1)),
    # the right factor on the wrong side of the fraction: S √d_k
    Mistake("scaled_times_sqrt_dk", lambda env: env["scores"] * np.sqrt(_d_k(env)),
            applies=lambda env: _d_k(env) not in (0, 1)),
    # only visible when X is on the way and its width differs from the key width
    Mistake("scaled_by_sqrt_d_model", _scaled_by_d_model,
            # √d_model = d_k is the computation of scaled_by_dk (d_model = 4, d_k = 2): named that way
            applies=lambda env: _d_model(env) not in (None, 0, _d_k(env), _d_k(env) ** 2)),
)


def _masked(env):
    return ops.apply_mask(env["scaled"], _causal(env))


def _masked_where(cells: Callable[[int, int], np.ndarray], fill: float) -> Compute:
    """The scaled scores with `cells(n_q, n_k)` set to `fill`: a causal mask put in the wrong place.
    The n_q queries are the last n_q of the n_k positions, so the diagonal sits at offset n_k − n_q."""
    cells = _once_per_shape(cells)

    def compute(env):
        out = np.array(env["scaled"], dtype=float)  # (n_q, n_k)
        out[..., cells(*out.shape[-2:])] = fill
        return out
    return compute


def _once_per_shape(cells: Callable[[int, int], np.ndarray]) -> Callable[[int, int], np.ndarray]:
    """`cells` made once per (n_q, n_k) and kept read-only (the masks only index)."""
    @functools.lru_cache(maxsize=256)
    def cached(n_q: int, n_k: int) -> np.ndarray:
        mask = cells(n_q, n_k)
        mask.setflags(write=False)
        return mask
    return cached


def _diagonal_and_above(n_q: int, n_k: int) -> np.ndarray:
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)  # (n_q, n_k): the future and itself


def _strictly_below(n_q: int, n_k: int) -> np.ndarray:
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q - 1)  # (n_q, n_k): the past, not itself


MASKED_MISTAKES = (
    Mistake("no_mask", lambda env: np.array(env["scaled"], dtype=float), applies=_causal),
    Mistake("mask_diagonal", _masked_where(_diagonal_and_above, -np.inf), applies=_causal),
    Mistake("mask_wrong_triangle", _masked_where(_strictly_below, -np.inf), applies=_causal),
    # a 0 still gets e^0 = 1 in the softmax
    Mistake("mask_zero_instead_of_inf", _masked_where(causal_mask, 0.0),
            applies=lambda env: _causal(env) and env["scaled"].shape[-2] > 1),
)


# ---------------------------------------------------------------- forward: softmax and output


def _softmax_rows(env):
    return _softmax_by_rows(env["masked"], env)


def _softmax_by_rows(z: np.ndarray, env: Values) -> np.ndarray:
    """softmax(z) row by row; in a reach run as on paper (each eˣ written)."""
    writer = _reach(env)
    if writer is not None:
        return softmax_by_hand(z, writer)
    with np.errstate(invalid="ignore"):
        return ops.softmax(z, axis=-1)  # (n_q, n_k), each row sums to 1


def _softmax_columns(env):
    with np.errstate(invalid="ignore"):
        return ops.softmax(env["masked"], axis=-2)


def _no_exp(env):
    z = env["masked"]
    finite = np.where(np.isfinite(z), z, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return finite / finite.sum(axis=-1, keepdims=True)


def _softmax_of_zeroed_mask(env):
    z = env["masked"]
    return ops.softmax(np.where(np.isneginf(z), 0.0, z), axis=-1)  # the given −∞ read as 0


def _mask_after_softmax(env):
    A = ops.softmax(env["scaled"], axis=-1)  # softmax over every key, the future included,
    A[..., ops.hidden_cells(*A.shape[-2:])] = 0.0  # then future weights zeroed without renormalising
    return A


SOFTMAX_MISTAKES = (
    Mistake("softmax_columns", _softmax_columns),
    Mistake("no_exp", _no_exp),
    Mistake("softmax_no_normalise", lambda env: np.exp(env["masked"])),  # e^z, never divided by the row's sum
    Mistake("mask_zero_instead_of_inf", _softmax_of_zeroed_mask,
            applies=lambda env: np.isneginf(env["masked"]).any(axis=(-2, -1))),
    Mistake("mask_after_softmax", _mask_after_softmax, applies=lambda env: _causal(env) and "scaled" in env),
)


def _output(env):
    return ops.weighted_sum(env["A"], env["V"])  # (n_q, n_k) @ (n_k, d_v) -> (n_q, d_v)


OUTPUT_MISTAKES = (
    # Aᵀ V: only conformable with as many queries as keys
    Mistake("weights_transposed", lambda env: ops.weighted_sum(env["A"].mT, env["V"]), applies=_square("A")),
)


# ---------------------------------------------------------------- backward: through O = A V


def _g_a(env):
    return ops.weighted_sum_backward(env["A"], env["V"], env["G_O"])[0]  # G_O Vᵀ: (n_q, n_k)


G_A_MISTAKES = (
    Mistake("grad_a_transposed", lambda env: env["V"] @ env["G_O"].mT),  # (n_k, d_v) @ (d_v, n_q)
    # G_O V: (n_q, d_v) @ (n_k, d_v), only conformable when d_v = n_k
    Mistake("grad_a_no_transpose", lambda env: env["G_O"] @ env["V"],
            applies=lambda env: env["G_O"].shape[-1] == env["V"].shape[-2]),
)


def _g_v(env):
    return ops.weighted_sum_backward(env["A"], env["V"], env["G_O"])[1]  # Aᵀ G_O: (n_k, d_v)


G_V_MISTAKES = (
    # A G_O: only conformable with as many queries as keys
    Mistake("grad_v_no_transpose", lambda env: env["A"] @ env["G_O"], applies=_square("A")),
)


# ---------------------------------------------------------------- backward: softmax, scaling, scores


def _through_mask(gradient: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Compute:
    """A gradient w.r.t. the softmax input, then back through the mask (hidden cells get none)."""
    return lambda env: ops.apply_mask_backward(gradient(env["A"], env["G_A"]), _causal(env))


def _g_scaled(env):
    """A ⊙ (G_A − r), r = rowsum(A ⊙ G_A); in a reach run r as the student writes it."""
    writer = _reach(env)
    if writer is None:
        return _through_mask(ops.softmax_backward)(env)
    A, G_A = env["A"], env["G_A"]
    r = written(np.sum(A * G_A, axis=-1, keepdims=True), writer)  # (n_q, 1)
    return ops.apply_mask_backward(A * (G_A - r), _causal(env))

G_SCALED_MISTAKES = (
    Mistake("softmax_grad_missing_term", _through_mask(lambda A, G_A: A * G_A)),
    # only ∂a_j/∂z_j = a_j (1 − a_j): the other weights' paths dropped
    Mistake("softmax_grad_diagonal_only", _through_mask(lambda A, G_A: A * (1 - A) * G_A)),
    # the bracket the wrong way round
    Mistake("softmax_grad_sign", _through_mask(lambda A, G_A: A * (np.sum(A * G_A, axis=-1, keepdims=True) - G_A))),
)


def _g_scores(env):
    return over_root(env["G_scaled"], _d_k(env), getattr(env, "rounding", None))  # as on the way forward


G_SCORES_MISTAKES = (
    Mistake("grad_scores_no_scale", lambda env: np.array(env["G_scaled"], dtype=float),
            applies=lambda env: _d_k(env) != 1),
    # multiplied by √d_k on the way back instead of divided
    Mistake("grad_scores_times_sqrt_dk", lambda env: env["G_scaled"] * np.sqrt(_d_k(env)),
            applies=lambda env: _d_k(env) not in (0, 1)),
)


def _g_q(env):
    return ops.scores_backward(env["Q"], env["K"], env["G_scores"])[0]  # G_S K: (n_q, d_k)


def _g_k(env):
    return ops.scores_backward(env["Q"], env["K"], env["G_scores"])[1]  # G_Sᵀ Q: (n_k, d_k)


G_Q_MISTAKES = (Mistake("grad_q_transposed", lambda env: env["G_scores"].mT @ env["K"]),)
G_K_MISTAKES = (Mistake("grad_k_no_transpose", lambda env: env["G_scores"] @ env["Q"]),)


# ---------------------------------------------------------------- backward: projections and embedding


def _g_w(x_name: str, g_name: str) -> Compute:
    return lambda env: env[x_name].mT @ env[g_name]  # Xᵀ G: (d_model, d_k or d_v)


def _g_x_v(env):
    return env["G_V"] @ env["W_V"].mT  # the value path's share of G_X: G_V W_Vᵀ


# G_V W_V: the transpose forgotten; only conformable when W_V is square (d_model = d_v)
G_X_V_MISTAKES = (Mistake("grad_x_v_no_transpose", lambda env: env["G_V"] @ env["W_V"], applies=_square("W_V")),)


def _g_x(env):
    # X feeds Q, K and V, so its gradient adds the three paths
    return env["G_Q"] @ env["W_Q"].mT + env["G_K"] @ env["W_K"].mT + _g_x_v(env)


def _g_x_over(paths: str) -> Compute:
    """G_X summed over some of the paths only ("QK": the query and key paths, the value path left out)."""
    kept = [(g, w) for g, w in G_X_PATHS if g[-1] in paths]
    return lambda env: sum(env[g] @ env[w].mT for g, w in kept)  # (n, d_model)


# G_X summed over one or two of the three paths X feeds (the others forgotten)
G_X_MISTAKES = (
    Mistake("grad_x_no_value_path", _g_x_over("QK")),
    Mistake("grad_x_no_key_path", _g_x_over("QV")),
    Mistake("grad_x_no_query_path", _g_x_over("KV")),
    Mistake("grad_x_query_path_only", _g_x_over("Q")),
    Mistake("grad_x_key_path_only", _g_x_over("K")),
    Mistake("grad_x_value_path_only", _g_x_over("V")),
)


def _g_e(env):
    return embed_backward(env["token_ids"], env["G_X"], np.shape(env["E"])[0])  # (vocab, d_model)


def _g_e_overwritten(env):
    G_E = np.zeros(np.shape(env["E"]))
    G_E[np.asarray(env["token_ids"], dtype=int)] = env["G_X"]  # fancy assignment keeps only the last repeat
    return G_E


def _repeated_token(env) -> bool:
    ids = env["token_ids"]
    return len(set(np.asarray(ids).tolist())) < len(ids)


G_E_MISTAKES = (Mistake("embedding_grad_no_accumulate", _g_e_overwritten, applies=_repeated_token),)


def _weight_grad(name: str, weight: str, g: str, shape: tuple[str, str]) -> AttentionStep:
    product = Product("X", g, left_t=True)
    symbol = f"G_{{{weight}}}"
    return AttentionStep(
        name, ("X", g), _g_w("X", g), shape=shape, symbol=symbol,
        formula_latex=rf"{symbol} = X^{{\top}} {g}", typst_symbol=f"G_({weight})",
        typst_formula=f"G_({weight}) = X^top {g}", builder="product", direction="backward",
        exact=_exact_product(product), product=product, count=count.count_product)


def _product_step(name: str, inputs: tuple[str, ...], compute: Compute, shape: tuple[str, str], symbol: str,
                  formula: str, typst_symbol: str, typst_formula: str, product: Product, direction: str,
                  **more: Any) -> AttentionStep:
    return AttentionStep(name, inputs, compute, shape=shape, symbol=symbol, formula_latex=f"{symbol} = {formula}",
                         typst_symbol=typst_symbol, typst_formula=typst_formula, builder="product",
                         direction=direction, exact=_exact_product(product), product=product,
                         count=count.count_product, **more)


_SCORES = Product("Q", "K", right_t=True)
_O = Product("A", "V")
_G_A = Product("G_O", "V", right_t=True)
_G_V = Product("A", "G_O", left_t=True)
_G_Q = Product("G_scores", "K")
_G_K = Product("G_scores", "Q", left_t=True)
_G_X_V = Product("G_V", "W_V", right_t=True)

# Cross-attention, padding and a given loss: the records K, V, masked and A below also read
# these given values when an exercise has them, and two records are their own:
#     H    a memory: cross-attention takes keys and values from it (K = H W_K, V = H W_V)
#     pad  key padding flags (1 = a padding token): the additive mask M joins the causal mask
#     T    a target: L = ½‖O − T‖², so G_O = ∂L/∂O = O − T
#     M    the additive padding mask; G_O, the gradient of the given loss
# Without those given values each record computes what it did before, and its old mistakes keep their
# order and conditions, so no exercise of another kind changes.


def _has(name: str) -> Callable[[Values], bool]:
    return lambda env: name in env


def _memory(env: Values) -> np.ndarray:
    """Where keys and values come from: the memory H in cross-attention, the cached latent C in latent
    attention (MLA: K = C W_K with W_K its up-projection), else the rows the queries read."""
    for source in ("H", "latent"):
        if source in env:
            return env[source]
    return _tokens(env)


def _exact_memory_product(weight: str) -> Callable[[dict, Values], Any]:
    def rule(xs: dict, values: Values):
        source = next((xs[s] for s in ("H", "latent") if s in values), None)
        return exact.xmatmul(_exact_tokens(xs, values) if source is None else source, xs[weight])
    return rule


def _memory_projection(step: AttentionStep, weight: str) -> AttentionStep:
    """K or V from H when a memory is given; the mistake of taking them from the queries' X."""
    return _replace(step, compute=lambda env: ops.project(_memory(env), env[weight]),  # (n_k, d_k or d_v)
                    exact=_exact_memory_product(weight),
                    count=lambda step, env: count.product_unless_identity(_memory(env), env[weight]),
                    mistakes=(Mistake("cross_keys_from_queries", lambda env: ops.project(env["X"], env[weight]),
                                      applies=_has("H")),))


# Sliding-window attention with attention sinks (StreamingLLM): the record M makes the window's additive mask
# when a window is given, as it makes the padding mask from padding flags (below); masked and A read either.
#     M_ij = 0 if j ≤ i and (i − j < w or j < s), else −∞      (0-based; attention_core.windows)


def _window(env: Values, wider: int = 0, sinks: bool = True) -> np.ndarray:
    """The window's mask (`wider` keys wider; without its sinks), as large as the scores it masks."""
    n = np.shape(env["scaled"])[-1]  # the scores are given beside the window
    mask = window_mask(n, int(env["window"]) + wider, int(env["sinks"]) if sinks else 0)
    return np.broadcast_to(mask, np.shape(env["scaled"]))  # (..., n, n): one per candidate


def _window_looking_ahead(env: Values) -> np.ndarray:
    """The window centred on the query: every key within w − 1 either side, and the sinks, also ahead."""
    n = np.shape(env["scaled"])[-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    seen = (np.abs(i - j) < int(env["window"])) | (j < int(env["sinks"]))
    return np.broadcast_to(np.where(seen, 0.0, -np.inf), np.shape(env["scaled"]))


WINDOW_MISTAKES = (
    Mistake("window_too_wide", lambda env: _window(env, 1), applies=_has("window")),
    Mistake("window_too_narrow", lambda env: _window(env, -1), applies=lambda env: int(env.get("window", 1)) > 1),
    Mistake("window_sinks_forgotten", lambda env: _window(env, sinks=False),
            applies=lambda env: "window" in env and int(env["sinks"]) > 0),
    Mistake("window_looks_ahead", _window_looking_ahead, applies=_has("window")),
)


def _padded(env: Values) -> bool:
    """An additive mask M does the masking (padding's, or a sliding window's)."""
    return "M" in env


def _unless_padded(m: Mistake) -> Mistake:
    """A causal-mask mistake of the old records: not made where the padding mask M does the masking."""
    return _replace(m, applies=lambda env, applies=m.applies: not _padded(env) and applies(env))


def _masked_or_padded(env):
    if "bias" in env:
        return alibi.biased(env["scaled"], env["bias"])  # ALiBi: the bias holds the causal mask
    if _padded(env):
        return np.asarray(env["scaled"], dtype=float) + np.asarray(env["M"], dtype=float)  # (n, n)
    return _masked(env)


def _exact_masked_or_padded(xs: dict, values: Values):
    if "bias" in values:
        return exact.xadd(xs["scaled"], xs["bias"])  # −∞ + z = −∞
    if "M" in values:
        out = xs["scaled"].copy()
        out[np.isneginf(np.asarray(values["M"], dtype=float))] = -sympy.oo
        return out
    return _exact_mask(xs, values)


def _rectangle_without_mask(env: Values) -> bool:
    rows, cols = np.shape(env["scaled"])[-2:]
    return not _causal(env) and not _padded(env) and rows < cols


MASKED_OR_PADDED_MISTAKES = (
    *(_unless_padded(m) for m in MASKED_MISTAKES),
    # cross-attention: the square causal rule (key j hidden from query i when j > i) on a rectangle whose
    # keys belong to another, complete sequence: none of them lies in a query's future
    Mistake("cross_causal_mask", _masked_where(lambda n_q, n_k: np.triu(np.ones((n_q, n_k), dtype=bool), k=1),
                                               -np.inf), applies=_rectangle_without_mask),
)


def _softmax_rows_or_padded(env):
    if _padded(env) and _reach(env) is None:
        return _softmax_visible(env["masked"])  # a query that sees no key attends to nothing: weights 0
    return _softmax_rows(env)


def _padding_after_softmax(env):
    A = _softmax_visible(ops.apply_mask(env["scaled"], _causal(env)))  # the causal softmax, padding ignored,
    return np.where(np.isneginf(np.asarray(env["M"], dtype=float)), 0.0, A)  # then padded keys zeroed, no renormalising


def _empty_row(env: Values) -> bool | np.ndarray:
    """A query that sees no key (on a stack: per candidate)."""
    return _padded(env) and np.all(np.isneginf(env["masked"]), axis=-1).any(axis=-1)


def _empty_row_uniform(env):
    A = _softmax_visible(env["masked"])
    A[np.all(np.isneginf(env["masked"]), axis=-1)] = 1.0 / np.shape(A)[-1]  # the "−1e9 instead of −∞" reading
    return A


SOFTMAX_OR_PADDED_MISTAKES = (
    *(_unless_padded(m) if m.id == "mask_after_softmax" else m for m in SOFTMAX_MISTAKES),
    Mistake("padding_after_softmax", _padding_after_softmax, applies=lambda env: "pad" in env and "scaled" in env),
    Mistake("padding_empty_row_uniform", _empty_row_uniform, applies=_empty_row),
)


def _exact_softmax_or_padded(xs: dict, values: Values):
    out = exact.xsoftmax(xs["masked"])
    if "M" in values:
        for i, row in enumerate(xs["masked"]):
            if all(z == -sympy.oo for z in row):
                out[i] = [sympy.Integer(0)] * len(row)  # a fully masked query: weights 0 by convention
    return out


def _pad_flags(env: Values) -> np.ndarray:
    pad = np.asarray(env["pad"], dtype=bool)  # (1, n), or (..., 1, n) on a stack
    return pad[..., 0, :] if pad.ndim > 1 else pad  # (..., n)


def _m(env):
    if "window" in env:
        return _window(env)
    return _padding_mask(env["pad"], _causal(env))  # (n, n): 0 or −∞


def _m_on_queries(env):
    pad = _pad_flags(env)
    n = pad.shape[-1]
    hidden = np.broadcast_to(pad[..., :, None], (*pad.shape[:-1], n, n))  # rows of padded queries, not columns
    if _causal(env):
        hidden = hidden | ops.hidden_cells(n)
    return np.where(hidden, -np.inf, 0.0)


M_MISTAKES = (
    Mistake("padding_on_queries", _m_on_queries, applies=_has("pad")),
    Mistake("padding_ignored", lambda env: _padding_mask(np.zeros(np.shape(env["pad"])), _causal(env)),
            applies=lambda env: "pad" in env and _pad_flags(env).any(axis=-1)),
    Mistake("no_mask", lambda env: _padding_mask(env["pad"], False), applies=lambda env: "pad" in env and _causal(env)),
    *WINDOW_MISTAKES,
)


def _exact_m(xs: dict, values: Values):
    M = _m(values)
    out = np.empty(M.shape, dtype=object)
    for idx, x in np.ndenumerate(M):
        out[idx] = -sympy.oo if np.isneginf(x) else sympy.Integer(0)
    return out


def _g_o(env):
    return np.asarray(env["O"], dtype=float) - np.asarray(env["T"], dtype=float)  # ∂(½‖O − T‖²)/∂O: (n_q, d_v)


def _exact_g_o(xs: dict, values: Values):
    return exact.xadd(xs["O"], np.vectorize(lambda t: None if t is None else -t, otypes=[object])(xs["T"]))


M_STEP = AttentionStep(
    "M", ("pad",), _m, shape=("n", "n"), symbol="M",
    formula_latex=r"M_{ij} = \begin{cases} -\infty & p_j = 1 \text{ or } j > i \text{ (causal)} \text{ or } "
                  r"(i - j \ge w \text{ and } j > s) \text{ (window)} \\ 0 & \text{otherwise} \end{cases}",
    typst_symbol="M", typst_formula="M_(i j) = cases(-infinity & p_j = 1 \"or\" j > i \"or\" (i - j >= w \"and\" "
                                    "j > s), 0 & \"otherwise\")",
    builder="value", direction="forward", mistakes=M_MISTAKES, exact=_exact_m, checkable=False,
    or_inputs=(("window", "sinks"),))
G_O_STEP = AttentionStep(
    "G_O", ("O", "T"), _g_o, shape=("n_q", "d_v"), symbol="G_O", formula_latex="G_O = O - T",
    typst_symbol="G_O", typst_formula="G_O = O - T", builder="value", direction="backward",
    exact=_exact_g_o, checkable=False)  # its mistakes (T − O, 2(O − T)) are backprop_loss's own: downstream of
# G_O a sign slip is the softmax's sign mistake and a lost ½ is √d_k's, so only G_O itself can name them


# The attention block: the rows of X normalised (LayerNorm with γ and β, RMSNorm with γ alone) before the
# projections read them (_tokens), and the input added back after attention. Both records need γ, so no
# exercise without one computes them.
#     X_norm = Norm(X) row by row      Y = X + O


def _norm_of(env: Values, axis: int = -1, ddof: int = 0) -> np.ndarray:
    return block.norm(env["X"], env["gamma"], env.get("beta"), axis=axis, ddof=ddof)  # (n, d_model)


X_NORM_MISTAKES = (
    Mistake("norm_over_columns", lambda env: _norm_of(env, axis=-2)),  # the statistics of each feature over the tokens
    Mistake("norm_variance_unbiased", lambda env: _norm_of(env, ddof=1)),  # the sample variance: ÷ (d − 1)
)


def _exact_norm(xs: dict, values: Values):
    """γ_j (x_ij − μ_i) / σ_i + β_j with sympy's exact roots (μ_i = 0 and no β for RMSNorm)."""
    X, gamma, beta = xs["X"], xs["gamma"], xs.get("beta") if "beta" in values else None
    out = np.full(X.shape, None, dtype=object)  # (n, d_model)
    for i, row in enumerate(X):
        if any(x is None for x in row):
            continue
        mu = sympy.Add(*row) / len(row) if beta is not None else sympy.Integer(0)
        sigma = sympy.sqrt(sympy.Add(*[(x - mu) ** 2 for x in row]) / len(row))
        for j, x in enumerate(row):
            out[i, j] = sympy.nsimplify(gamma[0, j] * (x - mu) / sigma + (beta[0, j] if beta is not None else 0))
    return out


def _after_norm(env):
    return block.post_norm_block(env["X"], env["gamma"], env.get("beta"), env["W_Q"], env["W_K"], env["W_V"],
                                 _d_k(env), _causal(env))  # Norm(X + Attention(X)): post-norm


Y_MISTAKES = (
    Mistake("residual_forgotten", lambda env: np.array(env["O"], dtype=float)),  # Y = O: the block's input lost
    Mistake("norm_after_residual", _after_norm, applies=lambda env: all(w in env for w in ("W_Q", "W_K", "W_V"))),
)

X_NORM_STEP = AttentionStep(
    "X_norm", ("X", "gamma"), _norm_of, shape=("n", "d_model"), symbol=r"\hat{X}",
    formula_latex=r"\hat{X}_{ij} = \gamma_j \frac{X_{ij} - \mu_i}{\sigma_i} + \beta_j", typst_symbol="hat(X)",
    typst_formula="hat(X)_(i j) = gamma_j (X_(i j) - mu_i) / sigma_i + beta_j", builder="value", direction="forward",
    mistakes=X_NORM_MISTAKES, exact=_exact_norm, checkable=False, count=count.count_norm)
Y_STEP = AttentionStep(
    "Y", ("X", "O", "gamma"), lambda env: np.asarray(env["X"], dtype=float) + env["O"], shape=("n", "d_model"),
    symbol="Y", formula_latex="Y = X + O", typst_symbol="Y", typst_formula="Y = X + O", builder="value",
    direction="forward", mistakes=Y_MISTAKES, exact=lambda xs, values: exact.xadd(xs["X"], xs["O"]), checkable=False,
    count=count.count_residual)


# ALiBi (given the heads h of H and the scores S; the masked record adds the bias, which holds the causal mask,
# one matrix per head) and temperature (given a row s, its temperatures τ and a cap c):
#     slope = 2^(−8h/H)   bias_ij = −m (i − j) (j ≤ i), −∞ (j > i)   masked = S / √d_k + bias   A1, A2: a head's A
#     a_tau<k> = softmax(s / τ_k)   s_capped = c tanh(s / c)   a_capped = softmax(s_capped)


def _bias_of(env: Values, sign: float = 1.0, causal: bool = True) -> np.ndarray:
    """The heads' biases (..., heads, n, n), or (..., n, n) for a single head; `sign` −1: +m (i − j)."""
    m = np.asarray(env["slope"], dtype=float)[..., 0, :]  # (..., heads)
    return alibi.alibi_bias(np.shape(env["scores"])[-1], sign * (m[..., 0] if m.shape[-1] == 1 else m), causal)


def _exact_slope(xs: dict, values: Values):
    H = int(values["H"])
    return np.array([[sympy.Integer(2) ** sympy.Rational(-8 * int(h), H) for h in np.ravel(values["h"])]],
                    dtype=object)  # (1, heads)


def _exact_bias(xs: dict, values: Values):
    n = np.shape(values["scores"])[-1]
    out = np.array([[-m * (i - j) if j <= i else -sympy.oo for j in range(n)] for m in xs["slope"][0]
                    for i in range(n)], dtype=object).reshape(-1, n, n)  # (heads, n, n)
    return out[0] if len(out) == 1 else out


def _biased_scaled(env):
    """(S + B) / √d_k: the bias divided with the scores."""
    return alibi.biased(env["scores"], env["bias"]) / np.sqrt(_d_k(env))


def _bias_after_softmax(env):
    """The causal softmax of the scaled scores, then the bias added to the weights (hidden keys stay 0)."""
    bias = np.asarray(env["bias"], dtype=float)
    A = ops.softmax(alibi.biased(env["scaled"], np.where(np.isfinite(bias), 0.0, -np.inf)), axis=-1)
    return np.where(np.isfinite(bias), A + bias, 0.0)


def _count_biased(step: AttentionStep, env: Values) -> count.Operations | None:
    """S / √d_k − m (i − j): one multiply-add per key behind the query (its bias is not 0); None: the causal or
    padding mask only copies."""
    if "bias" not in env:
        return None
    return count.Operations(multiply_adds=int(np.count_nonzero(np.isfinite(env["bias"]) & (env["bias"] != 0))))


BIASED_MISTAKES = (Mistake("alibi_bias_scaled", _biased_scaled,
                           applies=lambda env: "bias" in env and _d_k(env) not in (0, 1)),)
BIASED_SOFTMAX_MISTAKES = (Mistake("alibi_bias_after_softmax", _bias_after_softmax,
                                   applies=lambda env: "bias" in env and "scaled" in env),)


def _several(env: Values, k: int) -> bool:
    """The exercise asks for two heads or more, head k among them (k from 1)."""
    return np.shape(env["slope"])[-1] >= max(k, 2)


def _head(env: Values, value: Any, k: int) -> np.ndarray:
    """Head k's matrix of a value stacked by heads; ValueError where there is none (the pipeline leaves it out)."""
    if not _several(env, k):
        raise ValueError(f"no head {k} of several")
    return np.asarray(value, dtype=float)[..., k - 1, :, :]


def _of_head(m: Mistake, k: int) -> Mistake:
    """A softmax mistake made in head k's matrix alone."""
    def applies(env):
        if not _several(env, k):
            return False
        flag = np.asarray(m.applies(env))
        # a flag per head (kept as an axis of 1, as the stack's other heads flag theirs), or one for every head
        return flag[..., k - 1:k] if flag.ndim else flag
    return Mistake(m.id, lambda env: _head(env, m.compute(env), k), applies)


def _head_step(k: int) -> AttentionStep:
    """Head k's weights (k from 1), the softmax of its biased scores, where the exercise asks for several."""
    return AttentionStep(
        f"A{k}", ("masked", "slope"), lambda env: _softmax_by_rows(_head(env, env["masked"], k), env),
        shape=("n_q", "n_k"), symbol=f"A_{{{k}}}",
        formula_latex=rf"A_{{{k}}} = \operatorname{{softmax}}\left(\frac{{S}}{{\sqrt{{d_k}}}} + B_{{{k}}}\right)",
        typst_symbol=f"A_{k}", typst_formula=f"A_{k} = op(\"softmax\")(S / sqrt(d_k) + B_{k})", builder="value",
        direction="forward",
        mistakes=tuple(_of_head(m, k) for m in (*SOFTMAX_OR_PADDED_MISTAKES, *BIASED_SOFTMAX_MISTAKES)),
        exact=lambda xs, values: exact.xsoftmax(xs["masked"][k - 1]), sanity=("weights",), checkable=False,
        count=lambda step, env: count.softmax_operations(_head(env, env["masked"], k)))


def _tau(env: Values, k: int) -> np.ndarray:
    """The k-th temperature (k from 1); ValueError where fewer are given (the pipeline leaves the value out)."""
    tau = np.asarray(env["tau"], dtype=float)
    if tau.shape[-1] < k:
        raise ValueError(f"a_tau{k}: {tau.shape[-1]} temperatures given")
    return tau[..., k - 1:k]  # (..., 1): divides every score of the row


def _tau_step(k: int) -> AttentionStep:
    """softmax(s / τ_k) of the row s: the weights at the k-th temperature."""
    name, tau = f"a_tau{k}", rf"\tau_{{{k}}}"

    def compute(env):
        return _softmax_by_rows(written(np.asarray(env["s"], dtype=float) / _tau(env, k), _reach(env)), env)

    def exact_rule(xs: dict, values: Values):
        t = sympy.nsimplify(float(np.ravel(_tau(values, k))[0]))
        return exact.xsoftmax(_per_cell(lambda x: x / t, xs["s"]))

    def hand(step: AttentionStep, env: Values) -> count.Operations:  # s / τ per score, then a softmax row
        s = np.asarray(env["s"], dtype=float)
        return count.Operations(divisions=int(np.size(s))) + count.softmax_operations(s)  # s/τ is 0 where s is

    times = Mistake("temperature_times_tau",
                    lambda env: _softmax_by_rows(np.asarray(env["s"], dtype=float) * _tau(env, k), env))
    return AttentionStep(
        name, ("s", "tau"), compute, shape=("1", "n"), symbol=f"a_{{{tau}}}",
        formula_latex=rf"a_{{{tau}}} = \operatorname{{softmax}}\left(\frac{{s}}{{{tau}}}\right)",
        typst_symbol=f"a_(tau_{k})", typst_formula=f"a_(tau_{k}) = op(\"softmax\")(s / tau_{k})", builder="value",
        direction="forward", mistakes=(times,), exact=exact_rule, checkable=False, count=hand)


def _per_cell(f: Callable[[Any], Any], M: np.ndarray) -> np.ndarray:
    """f of every exact cell (None stays None)."""
    return np.vectorize(lambda x: None if x is None else f(x), otypes=[object])(M)


ALIBI_STEPS = (
    AttentionStep("slope", ("h", "H"), lambda env: alibi.alibi_slope(env["h"], env["H"])[..., None, :],
                  shape=("1", "heads"), symbol="m", formula_latex=r"m_h = 2^{-8h/H}", typst_symbol="m",
                  typst_formula="m_h = 2^(-8 h / H)", builder="value", direction="forward",
                  mistakes=(Mistake("alibi_slope_off_by_one",  # heads counted from 0
                                    lambda env: alibi.alibi_slope(np.asarray(env["h"]) - 1, env["H"])[..., None, :]),),
                  exact=_exact_slope, checkable=False,
                  count=lambda step, env: count.Operations(exponentials=int(np.shape(env["slope"])[-1]))),
    AttentionStep("bias", ("slope", "scores"), _bias_of, shape=("n_q", "n_k"), symbol="B",
                  formula_latex=r"B_{ij} = \begin{cases} -m\,(i - j) & j \le i \\ -\infty & j > i \end{cases}",
                  typst_symbol="B", typst_formula="B_(i j) = cases(-m (i - j) & j <= i, -infinity & j > i)",
                  builder="value", direction="forward",
                  mistakes=(Mistake("alibi_not_causal", lambda env: _bias_of(env, causal=False)),  # −m |i − j|
                            Mistake("alibi_bias_sign", lambda env: _bias_of(env, sign=-1.0))),
                  exact=_exact_bias, checkable=False),  # −m (i − j): counted with the sum it joins (masked)
)
ALIBI_HEAD_STEPS = (_head_step(1), _head_step(2))
TEMPERATURE_STEPS = (
    *(_tau_step(k) for k in (1, 2, 3)),
    AttentionStep("s_capped", ("s", "cap"), lambda env: soft_cap(env["s"], float(env["cap"])), shape=("1", "n"),
                  symbol=r"\hat{s}", formula_latex=r"\hat{s} = c \operatorname{tanh}\left(\frac{s}{c}\right)",
                  typst_symbol="hat(s)", typst_formula="hat(s) = c tanh(s / c)", builder="value",
                  direction="forward",
                  mistakes=(Mistake("temperature_cap_forgotten", lambda env: np.array(env["s"], dtype=float)),),
                  exact=lambda xs, values: _per_cell(lambda x: xs["cap"] * sympy.tanh(x / xs["cap"]), xs["s"]),
                  checkable=False,  # per score: tanh(s / c) read off the prompt's table, times c
                  count=lambda step, env: count.Operations(exponentials=int(np.size(env["s"])),
                                                           multiply_adds=int(np.size(env["s"])))),
    AttentionStep("a_capped", ("s_capped",), lambda env: _softmax_by_rows(env["s_capped"], env), shape=("1", "n"),
                  symbol=r"\hat{a}", formula_latex=r"\hat{a} = \operatorname{softmax}(\hat{s})",
                  typst_symbol="hat(a)", typst_formula="hat(a) = op(\"softmax\")(hat(s))", builder="value",
                  direction="forward",
                  mistakes=(Mistake("temperature_cap_after_softmax",  # c tanh(softmax(s) / c)
                                    lambda env: soft_cap(ops.softmax(env["s"], axis=-1), float(env["cap"])),
                                    applies=lambda env: "s" in env and "cap" in env),),
                  exact=lambda xs, values: exact.xsoftmax(xs["s_capped"]), checkable=False,
                  count=lambda step, env: count.softmax_operations(env["s_capped"])),
)


# Linear attention (an exercise flags it with `linear`): the feature map φ(x) = elu(x) + 1 in place of the
# softmax's exponentials, and the keys and values summed first.
#     phi_Q = φ(Q)    phi_K = φ(K)    KV = φ(K)ᵀ V    z = φ(K)ᵀ 1


def _feature_step(name: str, source: str) -> AttentionStep:
    symbol = rf"\phi({source})"
    return AttentionStep(
        name, (source, "linear"), lambda env: linear.feature_map(env[source]), shape=_SHAPES[source], symbol=symbol,
        formula_latex=rf"{symbol}_{{ij}} = \operatorname{{elu}}({source}_{{ij}}) + 1", typst_symbol=f"phi({source})",
        typst_formula=f"phi({source})_(i j) = op(\"elu\")({source}_(i j)) + 1", builder="value", direction="forward",
        checkable=False, count=lambda step, env: count.Operations(additions=int(np.size(env[source]))))


_SHAPES = {"Q": ("n_q", "d_k"), "K": ("n_k", "d_k")}
_KV = Product("phi_K", "V", left_t=True)
LINEAR_STEPS = (
    _feature_step("phi_Q", "Q"),
    _feature_step("phi_K", "K"),
    _product_step("KV", ("phi_K", "V"), lambda env: linear.key_value(env["phi_K"], env["V"]), ("d_k", "d_v"),
                  r"\mathrm{KV}", r"\phi(K)^{\top} V", 'upright("KV")', 'upright("KV") = phi(K)^top V', _KV, "forward",
                  checkable=False),
    AttentionStep("z", ("phi_K",), lambda env: linear.normaliser(env["phi_K"]), shape=("d_k", "1"), symbol="z",
                  formula_latex=r"z = \phi(K)^{\top} \mathbf{1}", typst_symbol="z",
                  typst_formula="z = phi(K)^top bold(1)", builder="value", direction="forward", checkable=False,
                  count=lambda step, env: count.Operations(additions=_column_sum_additions(env["phi_K"]))),
)


def _column_sum_additions(M: np.ndarray) -> int:
    return int(np.size(M) - np.shape(M)[-1])  # n − 1 additions per column


# The online softmax (FlashAttention): one row of scores S (1 × n_k) read `tile` keys at a time, row t of each
# value holding it after tile t (attention_core.online_softmax). Its O is a second record of O, computed from
# the running values where they are there (RECORDS_OF, record_for); A V stays O's main record. In a rounded
# run e^x is read off the table (EXP_PLACES) and each row written before the next tile carries it on.
#     m = running maximum    l = ℓ, the running sum    O_acc = o, the output accumulator    O = o_T / ℓ_T

AXES.update({"T": "tiles of keys (the online softmax: one row per tile)"})


def _tiles_past_two(env: Values) -> bool:
    """More than two tiles: with two, each tile's own maximum gives what no rescale gives (the maximum moves)."""
    return np.shape(env["S"])[-1] // int(env["tile"]) > 2


def _running(env: Values, values: str | None = None, rescale: int = 1, per_tile: bool = False) -> np.ndarray:
    """ℓ (values None) or o from the running maxima in env, as a mistake may make it (the recurrence's
    parameters); in a rounded run (a careful student's reach too) e^x and each row as written."""
    rounding = getattr(env, "rounding", None)
    table = np.exp if rounding is None else lambda x: round_half_up(np.exp(x), EXP_PLACES)
    return online.running_sum(env["S"], env["m"], int(env["tile"]), None if values is None else env[values],
                              rescale=rescale, divide_by=env["l"] if per_tile else None, table=table,
                              write=lambda row: round_half_up(row, rounding))


def _online_mistakes(values: str | None) -> tuple[Mistake, ...]:
    return (Mistake("online_no_rescale", lambda env: _running(env, values, rescale=0)),
            Mistake("online_rescale_inverted", lambda env: _running(env, values, rescale=-1)),
            *((Mistake("online_divide_per_tile", lambda env: _running(env, values, per_tile=True)),) if values else ()),
            # each tile's own maximum as m (the m record's mistake), and nothing rescaled against it
            Mistake("online_tile_max", lambda env: _running(env, values, rescale=0), applies=_tiles_past_two))


def _exact_online(name: str) -> Callable[[dict, Values], Any]:
    """m, ℓ or o after each tile in closed form (every key so far against the maximum so far); O = o_T / ℓ_T."""
    def rule(xs: dict, values: Values) -> np.ndarray:
        if name == "O":
            over = None if xs["l"][-1, 0] is None else 1 / xs["l"][-1, 0]
            return np.array([[exact.xmul(x, over) for x in xs["O_acc"][-1]]], dtype=object)
        s, tile = list(xs["S"][0]), int(values["tile"])
        V = xs["V"] if name == "O_acc" else np.full((len(s), 1), sympy.Integer(1), dtype=object)
        rows = []
        for end in range(tile, len(s) + 1, tile):
            top = sympy.Max(*s[:end])
            e = [sympy.exp(x - top) if x != -sympy.oo else sympy.Integer(0) for x in s[:end]]
            rows.append([top] if name == "m" else
                        [exact.xsum([exact.xmul(e[j], V[j, c]) for j in range(end)]) for c in range(V.shape[1])])
        return np.array(rows, dtype=object)
    return rule


def _online_record(name: str, inputs: tuple[str, ...], compute: Compute, shape: tuple[str, str], symbol: str,
                   formula: str, typst_symbol: str, typst_formula: str, **more: Any) -> AttentionStep:
    return AttentionStep(name, inputs, compute, shape=shape, symbol=symbol, formula_latex=formula,
                         typst_symbol=typst_symbol, typst_formula=typst_formula, builder="value", direction="forward",
                         exact=_exact_online(name), checkable=False, **more)


ONLINE_STEPS = (
    _online_record("m", ("S", "tile"), lambda env: online.running_max(env["S"], env["tile"]), ("T", "1"), "m",
                   r"m_t = \max\left(m_{t-1},\ \max_{j \in t} s_j\right)", "m", "m_t = max(m_(t-1), max_(j in t) s_j)",
                   mistakes=(Mistake("online_tile_max", lambda env: online.running_max(env["S"], env["tile"], True),
                                     applies=_tiles_past_two),), count=lambda step, env: count.NONE),
    _online_record("l", ("S", "m", "tile"), _running, ("T", "1"), r"\ell",
                   r"\ell_t = e^{m_{t-1} - m_t}\,\ell_{t-1} + \sum_{j \in t} e^{s_j - m_t}", "ell",
                   "ell_t = e^(m_(t-1) - m_t) ell_(t-1) + sum_(j in t) e^(s_j - m_t)", mistakes=_online_mistakes(None),
                   count=count.count_running_sum),
    _online_record("O_acc", ("S", "V", "m", "tile"), lambda env: _running(env, "V"), ("T", "d_v"), "o",
                   r"o_t = e^{m_{t-1} - m_t}\,o_{t-1} + \sum_{j \in t} e^{s_j - m_t}\,v_j", "o",
                   "o_t = e^(m_(t-1) - m_t) o_(t-1) + sum_(j in t) e^(s_j - m_t) v_j", mistakes=_online_mistakes("V"),
                   count=count.count_running_sum),
    _online_record("O", ("O_acc", "l"), lambda env: online.output(env["l"], env["O_acc"]), ("1", "d_v"), "O",
                   r"O = \frac{o_T}{\ell_T}", "O", "O = o_T / ell_T",
                   # divided after every tile already: o_T taken as it is
                   mistakes=(Mistake("online_divide_per_tile", lambda env: np.array(env["O_acc"][..., -1:, :])),),
                   count=lambda step, env: count.Operations(divisions=int(np.shape(env["O_acc"])[-1]))),
)


STEPS: tuple[AttentionStep, ...] = (
    AttentionStep("X", ("token_ids", "E"), _embedding, shape=("n", "d_model"), symbol="X",
                  formula_latex=r"x_{i} = E[t_{i}]", typst_symbol="X", typst_formula="x_i = E[t_i]",
                  builder="embedding", direction="forward", exact=_exact_embedding, checkable=False),
    X_NORM_STEP,  # an attention block's normalised rows, read by the projections
    _product_step("latent", ("X", "W_DKV"), lambda env: ops.project(env["X"], env["W_DKV"]), ("n", "d_c"), "C",
                  "X W_{DKV}", "C", "C = X W_(D K V)", Product("X", "W_DKV"), "forward", checkable=False),
    # MLA's cached latent C: the keys and values are up-projected from it (_memory)
    _projection("Q", "W_Q", ("n_q", "d_k")),
    _memory_projection(_projection("K", "W_K", ("n_k", "d_k")), "W_K"),
    _memory_projection(_projection("V", "W_V", ("n_k", "d_v")), "W_V"),
    *LINEAR_STEPS,  # linear attention's feature maps and key-value sums
    *ONLINE_STEPS,  # the online softmax's running values and its O
    _product_step("scores", ("Q", "K"), _scores, ("n_q", "n_k"), "S", r"Q K^{\top}", "S", "S = Q K^top",
                  _SCORES, "forward", mistakes=SCORES_MISTAKES),
    AttentionStep("scaled", ("scores", "d_k"), _scaled, shape=("n_q", "n_k"), symbol="Z",
                  formula_latex=r"Z = \frac{S}{\sqrt{d_k}}", typst_symbol="Z", typst_formula="Z = S / sqrt(d_k)",
                  builder="scale", direction="forward", mistakes=SCALED_MISTAKES, exact=_exact_scale("scores"),
                  scales="scores", count=count.count_scale),
    M_STEP,  # the padding mask comes before the scores it masks
    *ALIBI_STEPS,  # ALiBi's slopes and bias, added by the masked record
    AttentionStep("masked", ("scaled", "M"), _masked_or_padded, shape=("n_q", "n_k"), symbol=r"\tilde{Z}",
                  formula_latex=r"\tilde{Z}_{ij} = \begin{cases} Z_{ij} & j \le i \\ -\infty & j > i \end{cases}",
                  typst_symbol="tilde(Z)",
                  typst_formula="tilde(Z)_(i j) = cases(Z_(i j) & j <= i, -infinity & j > i)",
                  builder="mask", direction="forward", mistakes=(*MASKED_OR_PADDED_MISTAKES, *BIASED_MISTAKES),
                  exact=_exact_masked_or_padded, sanity=("mask_infinities",), count=_count_biased,
                  or_inputs=(("scaled", "bias"), ("scaled",))),
    AttentionStep("A", ("masked",), _softmax_rows_or_padded, shape=("n_q", "n_k"), symbol="A",
                  formula_latex=r"A_{ij} = \frac{e^{\tilde{Z}_{ij}}}{\sum_{k} e^{\tilde{Z}_{ik}}}",
                  typst_symbol="A", typst_formula="A_(i j) = e^(tilde(Z)_(i j)) / (sum_k e^(tilde(Z)_(i k)))",
                  builder="softmax", direction="forward",
                  mistakes=(*SOFTMAX_OR_PADDED_MISTAKES, *BIASED_SOFTMAX_MISTAKES), exact=_exact_softmax_or_padded,
                  sanity=("weights",), count=count.count_softmax),
    *ALIBI_HEAD_STEPS,  # each head's weights where ALiBi asks for several
    *TEMPERATURE_STEPS,
    _product_step("O", ("A", "V"), _output, ("n_q", "d_v"), "O", "A V", "O", "O = A V", _O, "forward",
                  mistakes=OUTPUT_MISTAKES, sanity=("output",)),
    Y_STEP,  # an attention block's residual: its input added back
    G_O_STEP,  # a given loss: the gradient that starts the backward pass
    _product_step("G_A", ("G_O", "V"), _g_a, ("n_q", "n_k"), "G_A", r"G_O V^{\top}", "G_A", "G_A = G_O V^top",
                  _G_A, "backward", mistakes=G_A_MISTAKES),
    _product_step("G_V", ("A", "G_O"), _g_v, ("n_k", "d_v"), "G_V", r"A^{\top} G_O", "G_V", "G_V = A^top G_O",
                  _G_V, "backward", mistakes=G_V_MISTAKES, sanity=("grad_v",)),
    AttentionStep("G_scaled", ("A", "G_A"), _g_scaled, shape=("n_q", "n_k"), symbol="G_Z",
                  formula_latex=r"G_Z = A \odot \left(G_A - r \mathbf{1}^{\top}\right), \quad "
                                r"r_{i} = \sum_{k} A_{ik} (G_A)_{ik}",
                  typst_symbol="G_Z",
                  typst_formula="G_Z = A dot.o (G_A - r bold(1)^top), quad r_i = sum_k A_(i k) (G_A)_(i k)",
                  builder="softmax_backward", direction="backward", mistakes=G_SCALED_MISTAKES,
                  exact=_exact_softmax_backward, sanity=("softmax_gradient",), count=count.count_softmax_backward),
    AttentionStep("G_scores", ("G_scaled", "d_k"), _g_scores, shape=("n_q", "n_k"), symbol="G_S",
                  formula_latex=r"G_S = \frac{G_Z}{\sqrt{d_k}}", typst_symbol="G_S",
                  typst_formula="G_S = G_Z / sqrt(d_k)", builder="scale", direction="backward",
                  mistakes=G_SCORES_MISTAKES, exact=_exact_scale("G_scaled"), scales="G_scaled",
                  sanity=("softmax_gradient",), count=count.count_scale),
    _product_step("G_Q", ("G_scores", "K"), _g_q, ("n_q", "d_k"), "G_Q", "G_S K", "G_Q", "G_Q = G_S K",
                  _G_Q, "backward", mistakes=G_Q_MISTAKES),
    _product_step("G_K", ("G_scores", "Q"), _g_k, ("n_k", "d_k"), "G_K", r"G_S^{\top} Q", "G_K",
                  "G_K = G_S^top Q", _G_K, "backward", mistakes=G_K_MISTAKES),
    _weight_grad("G_W_Q", "W_Q", "G_Q", ("d_model", "d_k")),
    _weight_grad("G_W_K", "W_K", "G_K", ("d_model", "d_k")),
    _weight_grad("G_W_V", "W_V", "G_V", ("d_model", "d_v")),
    _product_step("G_X_V", ("G_V", "W_V"), _g_x_v, ("n_k", "d_model"), r"G_X^{(V)}", r"G_V W_V^{\top}",
                  "G_X^((V))", "G_X^((V)) = G_V W_V^top", _G_X_V, "backward", mistakes=G_X_V_MISTAKES,
                  checkable=False),
    AttentionStep("G_X", ("G_Q", "W_Q", "G_K", "W_K", "G_V", "W_V"), _g_x, shape=("n", "d_model"), symbol="G_X",
                  formula_latex=r"G_X = G_Q W_Q^{\top} + G_K W_K^{\top} + G_V W_V^{\top}", typst_symbol="G_X",
                  typst_formula="G_X = G_Q W_Q^top + G_K W_K^top + G_V W_V^top", builder="g_x",
                  direction="backward", mistakes=G_X_MISTAKES, exact=_exact_g_x, count=count.count_g_x),
    AttentionStep("G_E", ("token_ids", "G_X", "E"), _g_e, shape=("vocab", "d_model"), symbol="G_E",
                  formula_latex=r"G_E[v] = \sum_{p:\, t_p = v} (G_X)_{p}", typst_symbol="G_E",
                  typst_formula="G_E [v] = sum_(p: t_p = v) (G_X)_p", builder="embedding_grad",
                  direction="backward", mistakes=G_E_MISTAKES, exact=_exact_embedding_grad,
                  sanity=("grad_embedding",), checkable=False, count=count.count_embedding_grad),
)
# a value with several records (O: A V, or the online softmax's o_T / ℓ_T) is known by its last one, the main one
STEP_BY_NAME: dict[str, AttentionStep] = {s.name: s for s in STEPS}
RECORDS_OF: dict[str, tuple[AttentionStep, ...]] = {}
for _step in STEPS:
    RECORDS_OF[_step.name] = (*RECORDS_OF.get(_step.name, ()), _step)


def record_for(name: str, have: Mapping[str, Any]) -> AttentionStep:
    """The record that computes `name` from the values `have`: the first of its records whose inputs are all
    there (the one the pipeline's plan takes), else its main one."""
    return next((s for s in RECORDS_OF[name] if s.runs_on(have.keys()) is not None), STEP_BY_NAME[name])

# the symbols of the values no step computes (the given matrices and numbers)
# `groups`: gqa's number of key/value groups; K_cache, V_cache: kv_cache's cached keys and values
INPUT_SYMBOLS: dict[str, str] = {"E": "E", "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V", "W_O": "W_O", "G_O": "G_O",
                                 "d_k": "d_k", "token_ids": "t", "H": "H", "T": "T", "pad": "p", "groups": "g",
                                 "K_cache": r"K_{\mathrm{cache}}", "V_cache": r"V_{\mathrm{cache}}",
                                 "pos": r"\mathrm{pos}", "theta": r"\theta", "perm": r"\mathrm{perm}",
                                 "gamma": r"\gamma", "beta": r"\beta", "W_DKV": r"W_{DKV}"}
INPUT_TYPST_SYMBOLS: dict[str, str] = {"token_ids": "t", "d_k": "d_k", "groups": "g", "pad": "p",
                                       "pos": 'upright("pos")', "theta": "theta", "perm": 'upright("perm")'}
# the given numbers of temperature (τ, the cap c), sliding_window (w, s), alibi (H heads, the heads h) and
# online_softmax (the tile width)
INPUT_SYMBOLS.update({"tau": r"\tau", "cap": "c", "window": "w", "sinks": "s", "tile": r"\mathrm{tile}"})
INPUT_TYPST_SYMBOLS.update({"tau": "tau", "cap": "c", "window": "w", "sinks": "s", "tile": 'upright("tile")'})
INPUT_SHAPES: dict[str, tuple[str, ...]] = {"E": ("vocab", "d_model"), "W_Q": ("d_model", "d_k"),
                                            "W_K": ("d_model", "d_k"), "W_V": ("d_model", "d_v"),
                                            "G_O": ("n_q", "d_v"), "token_ids": ("n",), "d_k": (),
                                            "H": ("n_k", "d_model"), "T": ("n_q", "d_v"), "pad": ("n",),
                                            "groups": ()}


def shape_of(name: str, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """The shape of a value in numbers from the sizes of its axes (n alone stands for n_q = n_k = n)."""
    axes = STEP_BY_NAME[name].shape if name in STEP_BY_NAME else INPUT_SHAPES[name]
    n = sizes.get("n")
    known = {"n_q": n, "n_k": n, "1": 1, **sizes}
    return tuple(int(known[a]) for a in axes)


def downstream(names: set[str]) -> set[str]:
    """`names` and every value computed (directly or not) from them."""
    out = set(names)
    for step in STEPS:
        if any(out.intersection(names) for names in (step.inputs, *step.or_inputs)):
            out.add(step.name)
    return out


def mistakes() -> dict[str, tuple[AttentionStep, ...]]:
    """Every catalogued mistake id → the steps that can make it, in step order."""
    found: dict[str, tuple[AttentionStep, ...]] = {}
    for step in STEPS:
        for m in step.mistakes:
            found[m.id] = found.get(m.id, ()) + (step,)
    return found


def of_direction(direction: str, checkable: bool | None = None) -> tuple[str, ...]:
    """The names of the forward (or backward) steps, in order; only the claimable ones when asked."""
    return tuple(s.name for s in STEPS if s.direction == direction and (checkable is None or s.checkable == checkable))
