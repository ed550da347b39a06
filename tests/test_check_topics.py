"""Check my work on every topic the app teaches (checkwork.check): a hand calculation typed step by step.

For each topic: a correct hand calculation, every value written to the places a person writes and the
next computed from it (every step accepted); one slip (the first wrong step found, the mistake named
where it is catalogued, later steps carried forward); and one pasted in another format Practice reads.
The expected values come from attention_core (the oracle), never from the checker's own chain.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import block, latent, linear, ops
from attention_core.alibi import alibi_bias, alibi_slope
from attention_core.embedding import embed, embed_backward
from attention_core.online_softmax import running_max, running_sum
from attention_core.positions import frequencies, rope, sinusoidal
from attention_core.temperature import soft_cap, softmax_temperature
from attention_core.windows import full_cache_floats, window_cache_floats, window_mask
from exercises.core import checkwork, engine
from exercises.core.numbers import round_half_up
from exercises.i18n import Msg


def text(M, places: int = 4) -> str:
    """A matrix as a person types it: one row per line, whole numbers whole, −∞ as -inf."""
    def cell(x: float) -> str:
        if np.isneginf(x):
            return "-inf"
        return str(int(x)) if float(x).is_integer() else f"{x:.{places}f}"
    return "\n".join(" ".join(cell(x) for x in row) for row in np.atleast_2d(M))


PASTES = {  # one paste format per topic, each a way Practice reads
    "bmatrix": lambda M: r"\begin{bmatrix}" + r" \\ ".join(" & ".join(f"{x:.4f}" for x in row) for row in M)
    + r"\end{bmatrix}",
    "numpy repr": lambda M: repr(np.round(np.asarray(M, dtype=float), 4)),
    "numpy print": lambda M: str(np.round(np.asarray(M, dtype=float), 4)),
    "csv": lambda M: "\n".join(",".join(f"{x:.4f}" for x in row) for row in M),
    "tabs": lambda M: "\n".join("\t".join(f"{x:.4f}" for x in row) for row in M),
    "matlab": lambda M: "[" + "; ".join(" ".join(f"{x:.4f}" for x in row) for row in M) + "]",
}


def written(values: dict[str, np.ndarray], places: int = 4) -> dict[str, np.ndarray]:
    return {name: round_half_up(np.asarray(v, dtype=float), places) for name, v in values.items()}


def head(X, W_Q, W_K, W_V, causal=True):
    """One head of self-attention from X, each value written to 4 places and carried on."""
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scaled = round_half_up(ops.scale(ops.scores(Q, K), W_Q.shape[1]), 4)
    A = round_half_up(ops.softmax(ops.apply_mask(scaled, causal)), 4)
    return A, round_half_up(A @ V, 4)


M = np.array
# ---------------------------------------------------------------- each topic: inputs, a hand calculation


def multi_head():
    X = M([[1., 0], [0, 1], [1, 1]])
    W = {"W_Q1": M([[1., 0], [0, 1]]), "W_K1": M([[1., 1], [0, 1]]), "W_V1": M([[1., 0], [0, 2]]),
         "W_Q2": M([[0., 1], [1, 0]]), "W_K2": M([[1., 0], [1, 1]]), "W_V2": M([[2., 1], [0, 1]])}
    W_O = M([[1., 0], [0, 1], [1, 0], [0, -1]])
    O1 = head(X, W["W_Q1"], W["W_K1"], W["W_V1"])[1]
    O2 = head(X, W["W_Q2"], W["W_K2"], W["W_V2"])[1]
    concat = np.hstack([O1, O2])
    return {"X": X, **W, "W_O": W_O, "causal": True}, {}, {"O1": O1, "O2": O2, "concat": concat,
                                                            "out": round_half_up(concat @ W_O, 4)}


def multi_head_slip(given, steps):
    """Head 2 without the division by √d_k; concat and out carry the learner's own head on."""
    A = ops.softmax(ops.apply_mask(ops.scores(given["X"] @ given["W_Q2"], given["X"] @ given["W_K2"]), True))
    O2 = round_half_up(A @ (given["X"] @ given["W_V2"]), 4)
    concat = np.hstack([steps["O1"], O2])
    return {**steps, "O2": O2, "concat": concat, "out": round_half_up(concat @ given["W_O"], 4)}, "O2", "no_scaling"


def gqa():
    X = M([[1., 0], [1, 2]])
    W = {f"W_Q{i}": M(w, dtype=float) for i, w in enumerate([[[1], [0]], [[0], [1]], [[1], [1]], [[-1], [1]]], 1)}
    W.update(W_K1=M([[1.], [1]]), W_K2=M([[0.], [1]]), W_V1=M([[1.], [0]]), W_V2=M([[2.], [1]]))
    group = {1: 1, 2: 1, 3: 2, 4: 2}  # 4 heads, 2 groups: consecutive heads share a group
    heads = {f"O{i}": head(X, W[f"W_Q{i}"], W[f"W_K{group[i]}"], W[f"W_V{group[i]}"])[1] for i in range(1, 5)}
    steps = {**heads, "concat": np.hstack(list(heads.values())), "cache_floats": M([[2. * (1 + 1)]])}
    return {"X": X, **W, "groups": 2, "causal": True}, {}, steps


def gqa_slip(given, steps):
    """Head 3 paired with group 1's keys and values (heads dealt out in turn): its group is checked."""
    O3 = head(given["X"], given["W_Q3"], given["W_K1"], given["W_V1"])[1]
    return {**steps, "O3": O3, "concat": np.hstack([steps["O1"], steps["O2"], O3, steps["O4"]])}, "O3", \
        "gqa_wrong_group"


def kv_cache():
    K_cache, V_cache = M([[1., 0], [0, 1], [1, 1]]), M([[1.], [2], [-1]])
    q, k, v = M([[1., 1]]), M([[0., 2]]), M([[2.]])
    K, V = np.vstack([K_cache, k]), np.vstack([V_cache, v])  # appended as the last row
    scores = q @ K.T
    A = round_half_up(ops.softmax(round_half_up(scores / np.sqrt(2), 4)), 4)
    size = 2 * 12 * 8 * 4 * 64  # K and V, 12 layers, 8 heads, t + 1 = 4 tokens, 64 per head
    given = {"K_cache": K_cache, "V_cache": V_cache, "q": q, "k": k, "v": v, "d_k": 2}
    return given, {"layers": 12, "heads": 8, "d_head": 64}, {"K": K, "V": V, "scores": scores, "A": A,
                                                              "O": round_half_up(A @ V, 4), "cache_floats": M([[size]])}


def kv_cache_slip(given, steps):
    """The cache counted for one layer only; every step before it right."""
    return {**steps, "cache_floats": steps["cache_floats"] / 12}, "cache_floats", "kv_cache_size_one_layer"


ROPE_Q, ROPE_K = M([[1., 0], [0, 1], [1, 1]]), M([[1., 1], [1, 0], [0, 1]])


def rope_topic():
    """Positions from 0, θ = 10000^(−2i/d) radians (1 radian for d = 2), cos and sin to 4 places."""
    pos, theta = np.arange(3), np.degrees(frequencies(2))
    Q_rot, K_rot = (round_half_up(rope(X, pos, theta), 4) for X in (ROPE_Q, ROPE_K))
    return {"Q": ROPE_Q, "K": ROPE_K, "pos": "0 1 2"}, {}, {"Q_rot": Q_rot, "K_rot": K_rot,
                                                            "scores": round_half_up(Q_rot @ K_rot.T, 4)}


def rope_slip(given, steps):
    """The query rows turned as if the positions started at 1; the scores carry them on."""
    Q_rot = round_half_up(rope(ROPE_Q, np.arange(1, 4), np.degrees(frequencies(2))), 4)
    return {**steps, "Q_rot": Q_rot, "scores": round_half_up(Q_rot @ steps["K_rot"].T, 4)}, "Q_rot", \
        "rope_position_off_by_one"


def cross_attention():
    X, H = M([[1., 0], [0, 1]]), M([[1., 1], [0, 1], [1, 0]])  # 2 queries, 3 keys from another sequence
    W_Q, W_K, W_V = M([[1., 0], [1, 1]]), M([[1., 0], [0, 1]]), M([[1.], [2]])
    Q, K, V = X @ W_Q, H @ W_K, H @ W_V
    scaled = round_half_up(ops.scale(ops.scores(Q, K), 2), 4)
    A = round_half_up(ops.softmax(scaled), 4)
    given = {"X": X, "H": H, "W_Q": W_Q, "W_K": W_K, "W_V": W_V, "causal": False}
    return given, {}, {"Q": Q, "K": K, "V": V, "scores": ops.scores(Q, K), "scaled": scaled, "A": A,
                       "O": round_half_up(A @ V, 4)}


def cross_attention_slip(given, steps):
    """The square causal triangle put on the rectangle of scores (no key is in a query's future)."""
    masked = steps["scaled"].copy()
    masked[np.triu(np.ones(masked.shape, dtype=bool), k=1)] = -np.inf
    return {"scaled": steps["scaled"], "masked": masked}, "masked", "cross_causal_mask"


def padding_mask():
    scaled = M([[1., 0, 2], [0.5, 1, 0], [1, 1, 1]])
    pad = M([[0., 0, 1]])  # the last key is padding
    mask = np.where(pad.astype(bool) | np.triu(np.ones((3, 3), dtype=bool), k=1), -np.inf, 0.0)
    masked = scaled + mask
    return {"scaled": scaled, "pad": pad, "causal": True}, {}, {"M": mask, "masked": masked,
                                                                 "A": round_half_up(ops.softmax(masked), 4)}


def padding_mask_slip(given, steps):
    """The padding put on the rows (queries) instead of the columns (keys)."""
    hidden = np.zeros((3, 3), dtype=bool)
    hidden[2] = True
    wrong = np.where(hidden | np.triu(np.ones((3, 3), dtype=bool), k=1), -np.inf, 0.0)
    return {"M": wrong}, "M", "padding_on_queries"


def positional():
    X, pos = M([[1., 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]), np.arange(3)
    P = round_half_up(sinusoidal(pos, 4), 4)
    return {"X": X, "pos": "0 1 2"}, {}, {"P": P, "X_P": X + P}


def positional_slip(given, steps):
    """sin and cos swapped in every pair."""
    P = steps["P"][:, [1, 0, 3, 2]]
    return {"P": P, "X_P": given["X"] + P}, "P", "positional_sin_cos_swapped"


def softmax_jacobian():
    z = M([[1., 2, 0]])
    a = round_half_up(ops.softmax(z), 4)
    a_s = round_half_up(ops.softmax(z / 2), 4)
    return {"z": z, "d_k": 4}, {}, {"a": a, "J": round_half_up(np.diag(a[0]) - a.T @ a, 4), "a_scaled": a_s,
                                    "J_scaled": round_half_up(np.diag(a_s[0]) - a_s.T @ a_s, 4)}


def softmax_jacobian_slip(given, steps):
    """Only the diagonal a_i of J: the −a_i a_j of every pair left out."""
    return {**steps, "J": np.diag(steps["a"][0])}, "J", "jacobian_diagonal_only"


BACKWARD_X = M([[1., 0], [0, 1], [1, 1]])
BACKWARD_W = {"W_Q": M([[1., 0], [1, 1]]), "W_K": M([[0., 1], [1, 0]]), "W_V": M([[1., 2], [0, 1]])}


def _backward(G_O, X=BACKWARD_X):
    """The whole backward pass of causal attention, each gradient written to 4 places and carried on."""
    Q, K, V = X @ BACKWARD_W["W_Q"], X @ BACKWARD_W["W_K"], X @ BACKWARD_W["W_V"]
    A = ops.softmax(ops.apply_mask(ops.scale(ops.scores(Q, K), 2), True))
    G_O = round_half_up(G_O(A @ V), 4)
    G_A, G_V = (round_half_up(g, 4) for g in ops.weighted_sum_backward(A, V, G_O))
    G_scaled = round_half_up(ops.apply_mask_backward(ops.softmax_backward(A, G_A), True), 4)
    G_scores = round_half_up(ops.scale_backward(G_scaled, 2), 4)
    G_Q, G_K = (round_half_up(g, 4) for g in ops.scores_backward(Q, K, G_scores))
    G_X = round_half_up(G_Q @ BACKWARD_W["W_Q"].T + G_K @ BACKWARD_W["W_K"].T + G_V @ BACKWARD_W["W_V"].T, 4)
    return {"G_O": G_O, "G_A": G_A, "G_V": G_V, "G_scaled": G_scaled, "G_scores": G_scores, "G_Q": G_Q, "G_K": G_K,
            "G_W_Q": round_half_up(X.T @ G_Q, 4), "G_W_K": round_half_up(X.T @ G_K, 4),
            "G_W_V": round_half_up(X.T @ G_V, 4), "G_X": G_X}


G_O_GIVEN = M([[1., -1], [0, 2], [1, 1]])


def backprop():
    """The whole backward pass from a given G_O down to G_X."""
    steps = _backward(lambda O: G_O_GIVEN)
    del steps["G_O"]
    return {"X": BACKWARD_X, **BACKWARD_W, "G_O": G_O_GIVEN, "causal": True}, {}, steps


def backprop_slip(given, steps):
    """G_scaled = A ⊙ G_A, the − rowsum term dropped; the later gradients carry it on."""
    Q, K = BACKWARD_X @ BACKWARD_W["W_Q"], BACKWARD_X @ BACKWARD_W["W_K"]
    A = ops.softmax(ops.apply_mask(ops.scale(ops.scores(Q, K), 2), True))
    G_scaled = round_half_up(A * steps["G_A"], 4)
    return {**steps, "G_scaled": G_scaled, "G_scores": round_half_up(G_scaled / np.sqrt(2), 4)}, "G_scaled", \
        "softmax_grad_missing_term"


TOKENS, E = M([0, 2, 0]), M([[1., 0], [0, 1], [1, 1]])
TARGET = M([[0., 1], [1, 0], [1, 1]])


def backprop_loss():
    """From L = ½‖O − T‖² over embedded tokens down to G_X and the embedding table's G_E."""
    X = embed(TOKENS, E)  # rows 1 and 3 are the same token
    steps = _backward(lambda O: O - TARGET, X)
    steps["G_E"] = embed_backward(TOKENS, steps["G_X"], len(E))
    given = {"token_ids": "0 2 0", "E": E, **BACKWARD_W, "T": TARGET, "causal": True}
    return given, {}, steps


def backprop_loss_slip(given, steps):
    """G_O = T − O: the loss's gradient with its sign the wrong way round."""
    return {"G_O": -steps["G_O"]}, "G_O", "loss_grad_sign"


ONLINE_S, ONLINE_V = M([[1., 0, 2, 1]]), M([[1.], [2], [-1], [1]])  # the maximum moves in the second tile


def online_softmax_topic():
    """One query, 4 keys in tiles of 2: m, ℓ and o after each tile, then O = o / ℓ."""
    m = running_max(ONLINE_S, 2)
    steps = {"m": m, "l": round_half_up(running_sum(ONLINE_S, m, 2), 4),
             "O_acc": round_half_up(running_sum(ONLINE_S, m, 2, ONLINE_V), 4)}
    steps["O"] = round_half_up(steps["O_acc"][-1:] / steps["l"][-1, 0], 4)
    return {"S": ONLINE_S, "V": ONLINE_V, "tile": 2, "causal": False}, {}, steps


def online_softmax_slip(given, steps):
    """ℓ not rescaled when the maximum moves (tile 1's sum added as it was); O carries the learner's ℓ on."""
    s = ONLINE_S[0]
    l = np.cumsum([np.exp(s[t:t + 2] - steps["m"][t // 2, 0]).sum() for t in (0, 2)])[:, None]
    l = round_half_up(l, 4)
    return {**steps, "l": l, "O": round_half_up(steps["O_acc"][-1:] / l[-1, 0], 4)}, "l", "online_no_rescale"


WINDOW_Z, WINDOW_V = M([[1., 0, 2, 1], [0, 2, 1, 0], [2, 1, 0, 1], [1, 0, 1, 2]]), M([[1.], [0], [2], [-1]])


def _windowed(mask):
    A = round_half_up(ops.softmax(WINDOW_Z + mask), 4)
    return {"M": mask, "A": A, "O": round_half_up(A @ WINDOW_V, 4)}


def sliding_window_topic():
    """A window of 2 keys and 1 sink over 4 tokens, and the cache of one layer and head for T = 1024."""
    steps = {**_windowed(window_mask(4, 2, 1)),
             "cache_floats": M([[window_cache_floats(2, 1, 64), full_cache_floats(1024, 64)]], dtype=float)}
    return {"scaled": WINDOW_Z, "window": 2, "sinks": 1, "V": WINDOW_V}, {"tokens": 1024, "d_head": 64}, steps


def sliding_window_slip(given, steps):
    """The sink forgotten: the first key hidden from the queries the window has passed; A and O carry it on."""
    return {**steps, **_windowed(window_mask(4, 2, 0))}, "M", "window_sinks_forgotten"


ALIBI_S = M([[2., 0, 1], [1, 2, 0], [0, 1, 2]])


def _alibi(slope: float):
    bias = alibi_bias(3, slope)
    masked = round_half_up(ALIBI_S / 2 + bias, 4)  # d_k = 4
    return {"slope": M([[slope]]), "bias": bias, "masked": masked, "A": round_half_up(ops.softmax(masked), 4)}


def alibi_topic():
    """Head 2 of 8: m = 2^(−8·2/8) = 1/4, the bias −m (i − j) on the causal triangle, then the softmax."""
    return {"scores": ALIBI_S, "d_k": 4, "H": 8, "h": "2"}, {}, _alibi(float(alibi_slope(2, 8)))


def alibi_slip(given, steps):
    """The slope of head 1 (2^(−8·1/8)) for head 2; bias, masked and A carry it on."""
    return _alibi(float(alibi_slope(1, 8))), "slope", "alibi_slope_off_by_one"


TEMPERATURE_S = M([[0., 2, 1]])


def temperature_topic():
    """softmax(s / τ) for τ = 1/2 and 2, then s capped at c = 2 (c tanh(s / c)) and its softmax."""
    capped = round_half_up(soft_cap(TEMPERATURE_S, 2.0), 4)
    steps = {"a_tau1": softmax_temperature(TEMPERATURE_S, 0.5), "a_tau2": softmax_temperature(TEMPERATURE_S, 2.0),
             "s_capped": capped, "a_capped": softmax_temperature(capped, 1.0)}
    return {"s": TEMPERATURE_S, "tau": "0.5 2", "cap": 2}, {}, written(steps)


def temperature_slip(given, steps):
    """s multiplied by τ = 1/2 instead of divided."""
    return {**steps, "a_tau1": round_half_up(softmax_temperature(TEMPERATURE_S * 0.5, 1.0), 4)}, "a_tau1", \
        "temperature_times_tau"


BLOCK_X, BLOCK_GAMMA, BLOCK_BETA = M([[1., 3], [2, 0], [0, 2]]), M([[2., 1]]), M([[0., 1]])
BLOCK_W = {"W_Q": M([[1., 0], [0, 1]]), "W_K": M([[1., 1], [0, 1]]), "W_V": M([[1., 0], [1, 1]])}


def _block(X_norm):
    """Causal attention on the learner's normalised rows, then the residual Y = X + O."""
    Q, K, V = X_norm @ BLOCK_W["W_Q"], X_norm @ BLOCK_W["W_K"], X_norm @ BLOCK_W["W_V"]
    Q, K, V = (round_half_up(m, 4) for m in (Q, K, V))
    A = round_half_up(ops.softmax(ops.apply_mask(ops.scale(ops.scores(Q, K), 2), True)), 4)
    O = round_half_up(A @ V, 4)
    return {"X_norm": X_norm, "Q": Q, "K": K, "V": V, "A": A, "O": O, "Y": BLOCK_X + O}


def attention_block_topic():
    """LayerNorm with γ and β (one row each), attention on the normalised rows, the input added back."""
    given = {"X": BLOCK_X, "gamma": BLOCK_GAMMA, "beta": BLOCK_BETA, **BLOCK_W, "causal": True}
    return given, {}, _block(round_half_up(block.layer_norm(BLOCK_X, BLOCK_GAMMA, BLOCK_BETA), 4))


def attention_block_slip(given, steps):
    """The sample variance (÷ (d − 1)) in the LayerNorm; the projections and attention carry it on."""
    return _block(round_half_up(block.layer_norm(BLOCK_X, BLOCK_GAMMA, BLOCK_BETA, ddof=1), 4)), "X_norm", \
        "norm_variance_unbiased"


LINEAR_Q, LINEAR_K, LINEAR_V = M([[1., -1], [0, 2]]), M([[-1., 0], [1, 1]]), M([[2.], [-1]])


def linear_attention_topic():
    """φ(x) = elu(x) + 1 on Q and K, the sums KV = φ(K)ᵀ V and z = φ(K)ᵀ 1 first, then O; no flag typed."""
    phi_Q, phi_K = (round_half_up(linear.feature_map(m), 4) for m in (LINEAR_Q, LINEAR_K))
    KV, z = round_half_up(linear.key_value(phi_K, LINEAR_V), 4), round_half_up(linear.normaliser(phi_K), 4)
    steps = {"phi_Q": phi_Q, "phi_K": phi_K, "KV": KV, "z": z, "O": round_half_up(linear.linear_order(phi_Q, KV, z), 4)}
    return {"Q": LINEAR_Q, "K": LINEAR_K, "V": LINEAR_V, "causal": False}, {}, steps


def linear_attention_slip(given, steps):
    """O = φ(Q) KV, the division by φ(Q) z left out."""
    return {**steps, "O": round_half_up(steps["phi_Q"] @ steps["KV"], 4)}, "O", "linear_no_normaliser"


MLA_X, MLA_W_DKV = M([[1., 0], [0, 1], [1, 1]]), M([[1.], [2]])  # d_c = 1: one float per token cached
MLA_W = {"W_Q1": M([[1.], [0]]), "W_Q2": M([[0.], [1]]), "W_UK1": M([[1.]]), "W_UK2": M([[2.]]),
         "W_UV1": M([[1.]]), "W_UV2": M([[-1.]])}


def mla_topic():
    """The latent C = X W_DKV, each head's K_i = C W_UK_i and V_i = C W_UV_i, its output, and the cache."""
    C = latent.latent(MLA_X, MLA_W_DKV)
    steps = {"C": C}
    for i in (1, 2):
        K, V = C @ MLA_W[f"W_UK{i}"], C @ MLA_W[f"W_UV{i}"]
        steps.update({f"K{i}": K, f"V{i}": V, f"O{i}": head(MLA_X, MLA_W[f"W_Q{i}"], MLA_W_DKV @ MLA_W[f"W_UK{i}"],
                                                                  MLA_W_DKV @ MLA_W[f"W_UV{i}"])[1]})
    steps["cache_floats"] = M([[latent.cache_floats(1)]], dtype=float)
    return {"X": MLA_X, "W_DKV": MLA_W_DKV, **MLA_W, "causal": True}, {}, steps


def mla_slip(given, steps):
    """The latent cached once per head (h d_c floats)."""
    return {**steps, "cache_floats": steps["cache_floats"] * 2}, "cache_floats", "mla_cache_per_head"


TOPICS = {  # topic: (a hand calculation, its slip, the paste format of the third test)
    "multi_head": (multi_head, multi_head_slip, "bmatrix"),
    "gqa": (gqa, gqa_slip, "numpy repr"),
    "kv_cache": (kv_cache, kv_cache_slip, "csv"),
    "rope": (rope_topic, rope_slip, "matlab"),
    "cross_attention": (cross_attention, cross_attention_slip, "tabs"),
    "padding_mask": (padding_mask, padding_mask_slip, "numpy print"),
    "positional": (positional, positional_slip, "bmatrix"),
    "softmax_jacobian": (softmax_jacobian, softmax_jacobian_slip, "matlab"),
    "backprop": (backprop, backprop_slip, "csv"),
    "backprop_loss": (backprop_loss, backprop_loss_slip, "numpy repr"),
    "online_softmax": (online_softmax_topic, online_softmax_slip, "matlab"),
    "sliding_window": (sliding_window_topic, sliding_window_slip, "csv"),
    "alibi": (alibi_topic, alibi_slip, "bmatrix"),
    "temperature": (temperature_topic, temperature_slip, "numpy repr"),
    "attention_block": (attention_block_topic, attention_block_slip, "tabs"),
    "linear_attention": (linear_attention_topic, linear_attention_slip, "numpy print"),
    "mla": (mla_topic, mla_slip, "matlab"),
}


def typed(values: dict) -> dict:
    return {k: text(v) if isinstance(v, np.ndarray) else v for k, v in values.items()}


def verdicts(report) -> dict[str, str]:
    return {name: s.verdict for name, s in report.steps.items()}


@pytest.mark.parametrize("topic", TOPICS)
def test_a_correct_hand_calculation_is_accepted_step_by_step(topic):
    given, stated, steps = TOPICS[topic][0]()
    report = checkwork.check(topic, typed(given), typed(steps), stated)
    assert report.ok, (topic, [m.render() for m in report.errors])
    assert not report.claim_errors, (topic, {k: m.render() for k, m in report.claim_errors.items()})
    assert set(report.steps) == set(steps) and report.all_right, (topic, verdicts(report))
    for line in report.summary():
        line.render("zh")  # every message filled in both languages


@pytest.mark.parametrize("topic", TOPICS)
def test_one_slip_is_the_first_wrong_step_and_its_mistake_is_named(topic):
    make, slip, _ = TOPICS[topic]
    given, stated, steps = make()
    claims, first, mistake = slip(given, steps)
    report = checkwork.check(topic, typed(given), typed(claims), stated)
    assert report.first_error == first, (topic, verdicts(report))
    assert report.likely_mistake == mistake, (topic, report.likely_mistake)
    assert any(Msg(f"misconception.{mistake}").render() in line.render() for line in report.summary()), topic
    earlier = list(report.steps)[:list(report.steps).index(first)]
    assert all(report.steps[s].verdict == "right" for s in earlier), (topic, verdicts(report))
    assert report.wrong_after == [], (topic, "later steps follow from the learner's own values", verdicts(report))
    carried = [s for s in list(report.steps)[len(earlier) + 1:] if not np.allclose(
        checkwork.read_matrix(s, claims[s]), report.reference[s], atol=1e-3, equal_nan=True)]
    assert report.consistent_after == carried, (topic, "judged on the learner's own values", verdicts(report))


@pytest.mark.parametrize("topic", TOPICS)
def test_a_pasted_step_is_read_as_typed(topic):
    """The last given matrix and the last step pasted in the topic's format; a slip in the paste is found."""
    make, _, fmt = TOPICS[topic]
    given, stated, steps = make()
    paste = PASTES[fmt]
    box = next(name for name in reversed(given) if isinstance(given[name], np.ndarray) and given[name].ndim == 2)
    last = next(name for name in reversed(steps) if np.isfinite(steps[name]).all())
    pasted_given = {**typed(given), box: paste(given[box])}
    report = checkwork.check(topic, pasted_given, {**typed(steps), last: paste(steps[last])}, stated)
    assert report.all_right and not report.claim_errors, (topic, fmt, verdicts(report), report.errors)
    wrong = np.array(steps[last], dtype=float)
    wrong[-1, -1] += 1
    report = checkwork.check(topic, pasted_given, {last: paste(wrong)}, stated)
    assert report.first_error == last and report.steps[last].status[-1, -1] == "wrong", (topic, fmt)


def test_gqa_and_mqa_check_the_group_of_each_head():
    """One K/V head for all (MQA) is accepted; under GQA a head with another group's keys is wrong."""
    given, _, steps = gqa()
    mqa = {k: v for k, v in given.items() if not k.endswith("2") or k.startswith("W_Q")} | {"groups": 1}
    heads = {f"O{i}": head(given["X"], given[f"W_Q{i}"], given["W_K1"], given["W_V1"])[1] for i in (1, 2)}
    mqa = {k: v for k, v in mqa.items() if k not in ("W_Q3", "W_Q4")}
    report = checkwork.check("gqa", typed(mqa), typed({**heads, "cache_floats": M([[2.]])}))
    assert report.all_right, verdicts(report)
    claims, _, _ = gqa_slip(given, steps)
    report = checkwork.check("gqa", typed(given), typed({"O3": claims["O3"]}))
    assert report.first_error == "O3" and report.likely_mistake == "gqa_wrong_group"


def test_a_third_head_is_checked_like_the_two_of_the_examples():
    given, _, steps = multi_head()
    given = {k: v for k, v in given.items() if k != "W_O"}
    third = {"W_Q3": M([[1., 1], [0, 1]]), "W_K3": M([[0., 1], [1, 1]]), "W_V3": M([[1., 0], [1, 1]])}
    O3 = head(given["X"], *third.values())[1]
    report = checkwork.check("multi_head", typed({**given, **third}),
                             typed({"O3": O3, "concat": np.hstack([steps["O1"], steps["O2"], O3])}))
    assert report.all_right and set(report.steps) == {"O3", "concat"}, verdicts(report)
    assert checkwork.check("multi_head", {**typed(given), "W_Q9": "1"}, {}).errors[0].key == "checkwork.not_an_input"


def test_a_later_step_typed_right_after_a_slip_is_right_not_carried():
    """A slip in O1, then concat typed as it truly is: concat is right (nothing to carry), so it is neither
    consistent with the slip nor wrong; typed from the slipped O1 it is consistent."""
    given, _, steps = multi_head()
    slipped = steps["O1"] + 0.5
    report = checkwork.check("multi_head", typed(given), typed({**steps, "O1": slipped}))
    assert report.first_error == "O1" and report.steps["concat"].verdict == "right", verdicts(report)
    assert report.consistent_after == [] and report.wrong_after == [], verdicts(report)
    carried = {"O1": slipped, "O2": steps["O2"], "concat": np.hstack([slipped, steps["O2"]])}
    report = checkwork.check("multi_head", typed(given), typed(carried))
    assert report.consistent_after == ["concat"], verdicts(report)


def test_a_number_given_with_decimals_is_read_with_them():
    """temperature's cap is a decimal (its exercises give 2.0): a learner's own 1.5 is checked; 0 is refused
    naming the box."""
    given = {"s": TEMPERATURE_S, "tau": "0.5 2", "cap": "1.5"}
    capped = round_half_up(soft_cap(TEMPERATURE_S, 1.5), 4)
    report = checkwork.check("temperature", typed(given), typed({"s_capped": capped}))
    assert report.all_right, (verdicts(report), [m.render() for m in report.errors])
    report = checkwork.check("temperature", typed({**given, "cap": "0"}), {})
    assert report.errors[0].key == "checkwork.positive_number" and "cap" in report.errors[0].render("zh")


def test_kv_cache_append_new_row_and_the_stated_model():
    given, stated, steps = kv_cache()
    first = np.vstack([given["k"], given["K_cache"]])  # the new row put first
    report = checkwork.check("kv_cache", typed(given), {"K": text(first)}, stated)
    assert report.first_error == "K" and report.likely_mistake == "kv_new_row_first"
    report = checkwork.check("kv_cache", typed(given), {"K": text(given["K_cache"])}, stated)  # not appended
    assert report.claim_errors["K"].params["why"].key == "misconception.kv_cache_not_appended"
    report = checkwork.check("kv_cache", typed(given), typed({"cache_floats": steps["cache_floats"]}))
    assert report.claim_errors["cache_floats"].key == "checkwork.needs_model"  # no model stated
    assert "layers" in report.claim_errors["cache_floats"].render()


def test_rope_says_which_convention_the_numbers_fit():
    given, _, steps = rope_topic()
    fit = checkwork.fits("rope", {**typed(given), "pos": ""}, typed(steps))
    assert [[m.key for m in labels] for labels in fit] == [
        [f"checkwork.convention.{c}" for c in ("half_split.false", "pos_from_one.false", "theta.default")],
        [f"checkwork.convention.{c}" for c in ("half_split.true", "pos_from_one.false", "theta.default")],
    ]  # one pair per row: neighbours and halves are the same pairs
    Q, K = M([[1., 0, 2, 1], [0, 1, 1, 0]]), M([[1., 1, 0, 1], [1, 0, 1, 1]])
    halves = [0, 2, 1, 3]  # columns (1, 3) and (2, 4) side by side
    back = np.argsort(halves)
    turned = {name: round_half_up(rope(X[:, halves], np.arange(1, 3), [30, 90])[:, back], 4)
              for name, X in (("Q_rot", Q), ("K_rot", K))}
    fit = checkwork.fits("rope", {"Q": text(Q), "K": text(K), "theta": "30 90"}, typed(turned))
    assert [[m.key for m in labels] for labels in fit] == [
        [f"checkwork.convention.{c}" for c in ("half_split.true", "pos_from_one.true", "theta.typed")]]
    report = checkwork.check("rope", {"Q": text(Q), "K": text(K), "theta": "30 90", "half_split": True,
                                      "pos_from_one": True}, typed(turned))
    assert report.all_right, verdicts(report)


def test_errors_name_the_box_and_the_topic_inputs():
    given, stated, steps = multi_head()
    report = checkwork.check("multi_head", {**typed(given), "W_K2": "1 0\n0 \\x"}, {})
    assert not report.ok and "W_K2" in report.errors[0].render() and "W_K2" in report.errors[0].render("zh")
    report = checkwork.check("multi_head", {k: v for k, v in typed(given).items() if k != "W_V2"}, {})
    assert report.errors[0].key == "checkwork.missing_inputs" and "W_V2" in report.errors[0].render()
    report = checkwork.check("multi_head", typed(given), {"O1": "1 2\n3 4\n5 x"})
    assert "O1" in report.claim_errors["O1"].render()
    assert checkwork.check("nonsense", {}, {}).errors[0].key == "checkwork.unknown_topic"
    assert checkwork.check("concepts", {}, {}).errors[0].key == "checkwork.unknown_topic"  # choices only
    report = checkwork.check("kv_cache", {**typed(kv_cache()[0]), "zzz": "1"}, {})
    assert report.errors[0].key == "checkwork.not_an_input"



def test_the_topic_sets_its_own_flag_and_reads_gamma_and_beta_as_rows_of_x():
    """linear attention's flag is the topic's (typed False, still linear); γ and β are refused, both shapes
    named, unless each is one row as wide as X."""
    given, _, steps = linear_attention_topic()
    assert checkwork.topic("linear_attention").implied == {"linear": True}
    report = checkwork.check("linear_attention", {**typed(given), "linear": False}, typed(steps))
    assert report.all_right, ("linear typed False", verdicts(report))
    given, _, steps = attention_block_topic()
    for name, bad in (("gamma", np.ones((3, 2))), ("beta", M([[1.]])), ("gamma", M([[1., 1, 1]]))):
        report = checkwork.check("attention_block", typed({**given, name: bad}), typed(steps))
        assert [m.key for m in report.errors] == ["checkwork.row_width"], (name, bad.shape, report.errors)
        assert f"{bad.shape[0]}×{bad.shape[1]}" in report.errors[0].render("zh"), (name, bad.shape)
    rms = {k: v for k, v in given.items() if k != "beta"}  # RMSNorm: γ alone
    X_norm = round_half_up(block.rms_norm(BLOCK_X, BLOCK_GAMMA), 4)
    report = checkwork.check("attention_block", typed(rms), typed({"X_norm": X_norm}))
    assert report.all_right, ("RMSNorm", verdicts(report), report.errors)


def test_the_kinds_own_mistakes_are_named_on_the_learners_sizes():
    """A causal linear attention (running states) and an MLA of 3 heads over a latent 2 wide: each kind's
    own mistake is named for the learner's flag, heads and widths, not its first level's."""
    given, _, steps = linear_attention_topic()
    phi_K, V = steps["phi_K"], LINEAR_V
    S, z = linear.causal_states(phi_K, V)
    future = {"S_t": np.repeat(phi_K.T @ V, 2, axis=1).T, "z_t": np.repeat(phi_K.sum(0, keepdims=True), 2, axis=0)}
    claims = {"phi_Q": steps["phi_Q"], "phi_K": phi_K, "S_t": future["S_t"]}
    report = checkwork.check("linear_attention", typed({**given, "causal": True}), typed(claims))
    assert report.all_right is False and (report.first_error, report.likely_mistake) == (
        "S_t", "linear_state_sees_future"), ("causal", verdicts(report), report.likely_mistake)
    X, W_DKV = M([[1., 0], [0, 1], [1, 1]]), M([[1., 0], [1, 1]])
    heads = {f"W_UK{i}": M([[1., 0], [0, 1]]) * i for i in (1, 2, 3)} | {f"W_UV{i}": M([[1., i], [0, 1]]) for i in (1, 2, 3)}
    heads |= {f"W_Q{i}": M([[1., 0], [i, 1]]) for i in (1, 2, 3)}
    own = {"X": X, "W_DKV": W_DKV, **heads, "causal": True}
    C = latent.latent(X, W_DKV)
    for floats, mistake in ((3 * 2, "mla_cache_per_head"), (latent.multi_head_cache_floats(3, 2, 2), "mla_cache_kv")):
        report = checkwork.check("mla", typed(own), typed({"C": C, "cache_floats": M([[floats]], dtype=float)}))
        assert (report.first_error, report.likely_mistake) == ("cache_floats", mistake), (mistake, verdicts(report))
    swapped = X @ heads["W_Q1"] @ heads["W_UV1"].T @ C.T  # the absorbed query with W_UV for W_UK
    report = checkwork.check("mla", typed(own), typed({"C": C, "scores1": swapped}))
    assert (report.first_error, report.likely_mistake) == ("scores1", "mla_up_swapped"), ("absorbed", verdicts(report))

PROPERTY_SEEDS = checkwork.TEMPLATE_SEEDS[:2]  # the exercises the topics' forms were read from


def test_a_topic_needs_no_checker_of_its_own():
    """Every kind whose parts its chain computes is a topic, read from the kind alone: at every level and
    seed its generated exercise's steps have boxes in the form of its givens; given its own givens and the
    model it states, every step (written to 2 places) is accepted, and a slip in any step, with only the
    steps before it typed, is the first wrong one."""
    topics = checkwork.topic_ids()
    assert set(TOPICS) <= set(topics) and "attention" in topics
    for topic in topics:
        spec = checkwork.topic(topic)
        for level, seed in ((level, seed) for level in engine.KINDS[topic].LEVELS for seed in PROPERTY_SEEDS):
            ex = checkwork.template(topic, level, seed)
            if any(p.is_choice for p in ex.parts):
                continue
            stated = {name: ex.params[name] for name in spec.stated}
            claims = {p.name: round_half_up(p.reference, 2) for p in ex.parts}
            boxes = next(form.steps for form in spec.forms if form.inputs == tuple(ex.given))
            assert set(claims) <= set(boxes), (topic, level, seed, "a step with no box", set(claims) - set(boxes))
            report = checkwork.check(topic, dict(ex.given), claims, stated)
            case = (topic, level, seed)
            assert report.ok, (*case, [m.render() for m in report.errors])
            assert report.all_right and not report.claim_errors, (*case, verdicts(report), report.claim_errors)
            names = list(claims)
            for i, name in enumerate(names):
                slipped = {k: claims[k] for k in names[:i]} | {name: claims[name] + 0.5}
                report = checkwork.check(topic, dict(ex.given), slipped, stated)
                assert report.first_error == name, (*case, name, verdicts(report), [m.render() for m in report.errors])


TEXTS = ["", "1", "-1", "2 1", "1 0; 0 1", "abc", "1e308", "-inf", "nan", "1/0", "0 1 2", "100000", True, [[1, 2]]]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(TOPICS)), st.data())
def test_never_raises_whatever_is_typed(topic, data):
    """Any topic, boxes of its own and others' names holding anything: messages, never an exception."""
    spec = checkwork.topic(topic)
    names = [*spec.kinds, "zzz"]
    inputs = data.draw(st.dictionaries(st.sampled_from(names), st.sampled_from(TEXTS), max_size=6))
    claims = data.draw(st.dictionaries(st.sampled_from([*spec.steps, "zzz"]), st.sampled_from(TEXTS), max_size=3))
    stated = data.draw(st.dictionaries(st.sampled_from(spec.stated or ("layers",)), st.sampled_from(TEXTS)))
    report = checkwork.check(topic, {**typed(TOPICS[topic][0]()[0]), **inputs}, claims, stated)
    for message in [*report.summary(), *report.claim_errors.values()]:
        message.render("zh")
