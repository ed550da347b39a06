"""Multi-head attention: h independent heads side by side, concatenated, optionally projected.

    head_i = Attention(X W_Q[i], X W_K[i], X W_V[i])
    MultiHead(X) = Concat(head_1, …, head_h) W_O
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import AttentionTrace, backward, self_attention


@dataclass(frozen=True)
class MultiHeadTrace:
    heads: tuple[AttentionTrace, ...]  # one full trace per head
    concat: np.ndarray  # (n, h·d_v)
    W_O: np.ndarray | None  # (h·d_v, d_out) or None
    out: np.ndarray  # (n, d_out) = concat W_O, or concat when there is no W_O


@dataclass(frozen=True)
class MultiHeadGrads:
    G_out: np.ndarray  # (n, d_out)
    G_concat: np.ndarray  # (n, h·d_v)
    G_W_O: np.ndarray | None  # (h·d_v, d_out)
    G_W_Q: tuple[np.ndarray, ...]  # per head (d, d_k)
    G_W_K: tuple[np.ndarray, ...]
    G_W_V: tuple[np.ndarray, ...]  # per head (d, d_v)
    G_X: np.ndarray  # (n, d), summed over heads


def multi_head_attention(X, W_Q, W_K, W_V, W_O=None, causal: bool = False) -> MultiHeadTrace:
    """W_Q, W_K, W_V are sequences of per-head weight matrices of equal length h."""
    if not (len(W_Q) == len(W_K) == len(W_V)) or len(W_Q) == 0:
        raise ValueError("W_Q, W_K and W_V need one matrix per head, the same number of heads each")
    heads = tuple(self_attention(X, wq, wk, wv, causal=causal) for wq, wk, wv in zip(W_Q, W_K, W_V))
    concat = np.concatenate([hd.O for hd in heads], axis=1)  # (n, h·d_v)
    if W_O is None:
        return MultiHeadTrace(heads=heads, concat=concat, W_O=None, out=concat)
    W_O = np.asarray(W_O, dtype=float)
    if W_O.shape[0] != concat.shape[1]:
        raise ValueError(f"the concatenation is {concat.shape[0]}×{concat.shape[1]} but W_O is "
                         f"{W_O.shape[0]}×{W_O.shape[1]}: W_O needs {concat.shape[1]} rows")
    return MultiHeadTrace(heads=heads, concat=concat, W_O=W_O, out=concat @ W_O)  # (n, d_out)


def multi_head_backward(tr: MultiHeadTrace, G_out) -> MultiHeadGrads:
    """Split the concatenation's gradient back into the heads and run each head's backward."""
    G_out = np.asarray(G_out, dtype=float)
    if tr.W_O is None:
        G_concat, G_W_O = G_out, None
    else:
        G_W_O = tr.concat.T @ G_out  # (h·d_v, d_out)
        G_concat = G_out @ tr.W_O.T  # (n, h·d_v)
    widths = np.cumsum([hd.O.shape[1] for hd in tr.heads])[:-1]
    per_head = [backward(hd, g) for hd, g in zip(tr.heads, np.split(G_concat, widths, axis=1))]
    return MultiHeadGrads(
        G_out=G_out, G_concat=G_concat, G_W_O=G_W_O,
        G_W_Q=tuple(g.G_W_Q for g in per_head),
        G_W_K=tuple(g.G_W_K for g in per_head),
        G_W_V=tuple(g.G_W_V for g in per_head),
        G_X=sum(g.G_X for g in per_head),  # X feeds every head
    )


# ---------------------------------------------------------------- back through out = concat W_O
# G_concat = G_out W_Oᵀ, G_W_O = concatᵀ G_out; the heads' G_O are G_concat's column blocks, and each
# head's G_V = A_iᵀ G_O_i (its O_i = A_i V_i).


def output_projection_backward(concat, W_O, G_out) -> tuple[np.ndarray, np.ndarray]:
    """(G_concat, G_W_O) for out = concat W_O."""
    concat, W_O, G_out = (np.asarray(M, dtype=float) for M in (concat, W_O, G_out))
    G_concat = G_out @ W_O.T  # (n, d_out) @ (d_out, h·d_v) -> (n, h·d_v)
    G_W_O = concat.T @ G_out  # (h·d_v, n) @ (n, d_out) -> (h·d_v, d_out)
    return G_concat, G_W_O


def split_heads(G_concat, widths) -> list[np.ndarray]:
    """G_concat's column blocks, one per head of width widths[i]: [G_O1, G_O2, …]."""
    edges = np.cumsum(list(widths))[:-1]
    return np.split(np.asarray(G_concat, dtype=float), edges, axis=-1)  # h × (n, d_v)


def head_output_backward(A, V, G_O) -> tuple[np.ndarray, np.ndarray]:
    """(G_A, G_V) of one head's O = A V, given its G_O."""
    A, V, G_O = (np.asarray(M, dtype=float) for M in (A, V, G_O))
    return G_O @ V.T, A.T @ G_O  # (n, n), (n, d_v)
