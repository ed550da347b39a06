"""The glossary: the words of attention, each with its formula where it has one.

A term's name and its one-to-two-sentence definition are catalog texts (``glossary.<key>.name``,
``glossary.<key>.text``); its formula is written in the notation of the solutions and the formula
sheet (S the scores, Z the scaled scores, Z̃ the masked ones, A the weights, O the output).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    key: str
    latex: str | None = None  # KaTeX; None for a term without a formula


TERMS: tuple[Term, ...] = (
    Term("token", r"x_i = E[t_i]"),
    Term("query", r"Q = X W_Q, \qquad q_i = x_i W_Q"),
    Term("key", r"K = X W_K, \qquad k_j = x_j W_K"),
    Term("value", r"V = X W_V"),
    Term("score", r"S = Q K^{\top}, \qquad S_{ij} = q_i \cdot k_j"),
    Term("d_k", r"\operatorname{Var}(q \cdot k) = d_k, \qquad \sqrt{64} = 8"),
    Term("scaled", r"Z = \frac{S}{\sqrt{d_k}}"),
    Term("logit", r"a_j = \frac{e^{z_j}}{\sum_k e^{z_k}}"),
    Term("mask", r"\tilde{Z} = Z + M, \qquad M_{ij} = \begin{cases} -\infty & j > i \\ 0 & j \le i \end{cases}"),
    Term("padding", r"M_{ij} = -\infty \quad \text{when key } j \text{ is padding}"),
    Term("softmax", r"\operatorname{softmax}(z)_j = \frac{e^{z_j - \max_k z_k}}{\sum_k e^{z_k - \max_k z_k}}"),
    Term("weight", r"A = \operatorname{softmax}(\tilde{Z}), \qquad \sum_j A_{ij} = 1"),
    Term("output", r"O = A V, \qquad o_i = \sum_j A_{ij} v_j"),
    Term("cross", r"Q = X W_Q, \qquad K = H W_K, \qquad V = H W_V"),
    Term("head", r"\operatorname{MultiHead}(X) = [\mathrm{head}_1 \;\cdots\; \mathrm{head}_h]\, W_O"),
    Term("group", r"\mathrm{head}_i \text{ uses } K_{g(i)},\ V_{g(i)}, \qquad "
                  r"g(i) = \left\lceil \frac{i\,g}{h} \right\rceil"),
    Term("kv_cache", r"K_{t+1} = \begin{bmatrix} K_t \\ k_{t+1} \end{bmatrix}, \qquad "
                     r"V_{t+1} = \begin{bmatrix} V_t \\ v_{t+1} \end{bmatrix}"),
    Term("tile", r"m' = \max\!\left(m, \max_j s_j\right), \qquad l' = l\, e^{m - m'} + \sum_j e^{s_j - m'}"),
    Term("position", r"X_P = X + P"),
    Term("rotary", r"\begin{bmatrix} q'_1 \\ q'_2 \end{bmatrix} = \begin{bmatrix} \cos p\theta & -\sin p\theta \\ "
                   r"\sin p\theta & \cos p\theta \end{bmatrix} \begin{bmatrix} q_1 \\ q_2 \end{bmatrix}"),
    Term("gradient", r"G_Y = \frac{\partial L}{\partial Y}, \qquad "
                     r"\operatorname{shape}(G_Y) = \operatorname{shape}(Y)"),
    Term("backprop", r"G_A = G_O V^{\top}, \qquad G_V = A^{\top} G_O"),
)


def text_keys() -> list[str]:
    """Every catalog key the glossary uses."""
    terms = [f"glossary.{t.key}.{part}" for t in TERMS for part in ("name", "text")]
    return ["glossary.title", "glossary.intro", *terms]
