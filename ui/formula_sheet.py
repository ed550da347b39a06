"""The formula sheet: every formula the exercises use, forward and backward, with shapes.

Notation as in exercises/latex.py (the solutions): n tokens, model width d, key width d_k, value width
d_v, h heads, vocabulary size m; S = QKᵀ the scores, Z = S/√d_k the scaled scores, Z̃ the masked ones,
A the weights, O the output; G_Y = ∂L/∂Y has the shape of Y (G_Z, G_S for the scaled and raw scores).

In the sources below ``[[Q | n | d_k]]`` writes Q with its shape (rows × columns) underneath.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SHAPED = re.compile(r"\[\[(.+?)\|(.+?)\|(.+?)\]\]")


def shaped(source: str) -> str:
    r"""[[Q | n | d_k]] → \underbrace{Q}_{n \times d_k}."""
    return _SHAPED.sub(lambda m: rf"\underbrace{{{m[1].strip()}}}_{{{m[2].strip()} \times {m[3].strip()}}}",
                       source)


@dataclass(frozen=True)
class Formula:
    source: str
    note: str | None = None  # catalog key of a one-line explanation

    @property
    def latex(self) -> str:
        return shaped(self.source)


@dataclass(frozen=True)
class Section:
    key: str  # formulas.<key>.title and formulas.<key>.caption in the catalog
    formulas: tuple[Formula, ...]


F = Formula
FORWARD = (
    Section("notation", (
        F(r"n, \quad d, \quad d_k, \quad d_v, \quad h, \quad m", "formulas.notation.sizes"),
        F(r"G_Y = \frac{\partial L}{\partial Y}, \qquad \operatorname{shape}(G_Y) = \operatorname{shape}(Y)",
          "formulas.notation.grad"),
    )),
    Section("embedding", (
        F(r"[[X | n | d]], \qquad x_{i} = E[t_{i}], \qquad E \in \mathbb{R}^{m \times d}",
          "formulas.embedding.lookup"),
    )),
    Section("projection", (
        F(r"[[Q | n | d_k]] = [[X | n | d]]\,[[W_Q | d | d_k]], \qquad [[K | n | d_k]] = X W_K, \qquad "
          r"[[V | n | d_v]] = X W_V"),
        F(r"Q_{ij} = \sum_{r=1}^{d} X_{ir} (W_Q)_{rj}", "formulas.projection.cell"),
    )),
    Section("scores", (
        F(r"[[S | n | n]] = [[Q | n | d_k]]\,[[K^{\top} | d_k | n]]"),
        F(r"S_{ij} = q_i \cdot k_j = \sum_{r=1}^{d_k} Q_{ir} K_{jr}", "formulas.scores.cell"),
    )),
    Section("scaling", (
        F(r"[[Z | n | n]] = \frac{S}{\sqrt{d_k}}"),
    )),
    Section("variance", (
        F(r"\operatorname{Var}(q \cdot k) = \sum_{r=1}^{d_k} \operatorname{Var}(q_r k_r) = d_k",
          "formulas.variance.sum"),
        F(r"\operatorname{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = \frac{d_k}{d_k} = 1",
          "formulas.variance.scaled"),
        F(r"d_k = 64: \quad \sigma(q \cdot k) = \sqrt{64} = 8, \qquad \sigma\!\left(\frac{q \cdot k}{8}\right) = 1",
          "formulas.variance.example"),
    )),
    Section("masking", (
        F(r"[[\tilde{Z} | n | n]], \qquad \tilde{Z}_{ij} = \begin{cases} Z_{ij} & j \le i \\ -\infty & j > i "
          r"\end{cases}", "formulas.masking.rule"),
        F(r"M = \operatorname{triu}(\mathbf{1}_{n \times n},\ k{=}1)", "formulas.masking.triu"),
    )),
    Section("softmax", (
        F(r"[[A | n | n]], \qquad A_{ij} = \frac{e^{\tilde{Z}_{ij}}}{\sum_{k} e^{\tilde{Z}_{ik}}}, \qquad "
          r"\sum_{j=1}^{n} A_{ij} = 1", "formulas.softmax.rows"),
        F(r"e^{-\infty} = 0 \ \Rightarrow\ A_{ij} = 0 \ \ (j > i)", "formulas.softmax.masked"),
        F(r"\frac{e^{z_j - c}}{\sum_k e^{z_k - c}} = \frac{e^{-c} e^{z_j}}{e^{-c} \sum_k e^{z_k}} = "
          r"\frac{e^{z_j}}{\sum_k e^{z_k}}, \qquad c = \max_k z_k", "formulas.softmax.max"),
    )),
    Section("weighted_sum", (
        F(r"[[O | n | d_v]] = [[A | n | n]]\,[[V | n | d_v]], \qquad o_i = \sum_{j=1}^{n} A_{ij} v_j",
          "formulas.weighted_sum.rows"),
        F(r"O = \operatorname{softmax}\!\left(\operatorname{mask}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right)\right) V",
          "formulas.weighted_sum.whole"),
    )),
    Section("multi_head", (
        F(r"[[\mathrm{head}_i | n | d_v]] = \operatorname{Attention}(X W_Q^{(i)},\ X W_K^{(i)},\ X W_V^{(i)}), "
          r"\qquad i = 1, \dots, h", "formulas.multi_head.heads"),
        F(r"[[C | n | h d_v]] = [\,\mathrm{head}_1 \mid \dots \mid \mathrm{head}_h\,], \qquad "
          r"[[\mathrm{out} | n | d_{\mathrm{out}}]] = C\,[[W_O | h d_v | d_{\mathrm{out}}]]",
          "formulas.multi_head.concat"),
    )),
)

BACKWARD = (
    Section("grad_weighted_sum", (
        F(r"O = AV: \qquad [[G_A | n | n]] = [[G_O | n | d_v]]\,[[V^{\top} | d_v | n]], \qquad "
          r"[[G_V | n | d_v]] = [[A^{\top} | n | n]]\,[[G_O | n | d_v]]"),
        F(r"(G_A)_{ij} = \sum_{k=1}^{d_v} (G_O)_{ik} V_{jk}, \qquad (G_V)_{jk} = \sum_{i=1}^{n} A_{ij} (G_O)_{ik}",
          "formulas.grad_weighted_sum.cells"),
        F(r"G_O = \begin{bmatrix} 1 & 2 \end{bmatrix},\ V = \begin{bmatrix} 2 & 4 \\ 6 & 8 \end{bmatrix}"
          r"\ \Rightarrow\ G_A = G_O V^{\top} = \begin{bmatrix} 10 & 22 \end{bmatrix}",
          "formulas.grad_weighted_sum.example"),
    )),
    Section("grad_value_proj", (
        F(r"[[G_{W_V} | d | d_v]] = [[X^{\top} | d | n]]\,[[G_V | n | d_v]], \qquad "
          r"[[G_X^{(V)} | n | d]] = G_V\,[[W_V^{\top} | d_v | d]]", "formulas.grad_value_proj.share"),
    )),
    Section("grad_softmax", (
        F(r"[[G_Z | n | n]] = A \odot \left(G_A - r \mathbf{1}^{\top}\right), \qquad "
          r"r_{i} = \sum_{k} A_{ik} (G_A)_{ik}", "formulas.grad_softmax.rowsum"),
        F(r"(G_Z)_{ij} = A_{ij} \left((G_A)_{ij} - r_{i}\right)", "formulas.grad_softmax.cell"),
        F(r"A_{ij} = 0 \ \ (j > i) \ \Rightarrow\ (G_Z)_{ij} = 0", "formulas.grad_softmax.masked"),
    )),
    Section("grad_scores", (
        F(r"[[G_S | n | n]] = \frac{G_Z}{\sqrt{d_k}}", "formulas.grad_scores.scale"),
        F(r"[[G_Q | n | d_k]] = [[G_S | n | n]]\,[[K | n | d_k]], \qquad "
          r"[[G_K | n | d_k]] = [[G_S^{\top} | n | n]]\,[[Q | n | d_k]]", "formulas.grad_scores.qk"),
    )),
    Section("grad_projections", (
        F(r"[[G_{W_Q} | d | d_k]] = X^{\top} G_Q, \qquad [[G_{W_K} | d | d_k]] = X^{\top} G_K, \qquad "
          r"[[G_{W_V} | d | d_v]] = X^{\top} G_V"),
        F(r"[[G_X | n | d]] = G_Q W_Q^{\top} + G_K W_K^{\top} + G_V W_V^{\top}", "formulas.grad_projections.x"),
    )),
    Section("grad_embedding", (
        F(r"[[G_E | m | d]], \qquad G_E[v] = \sum_{p:\, t_p = v} (G_X)_{p}",
          "formulas.grad_embedding.accumulate"),
    )),
    Section("grad_multi_head", (
        F(r"[[G_{W_O} | h d_v | d_{\mathrm{out}}]] = C^{\top} G_{\mathrm{out}}, \qquad "
          r"[[G_C | n | h d_v]] = G_{\mathrm{out}} W_O^{\top}"),
        F(r"G_C = [\,G_O^{(1)} \mid \dots \mid G_O^{(h)}\,], \qquad G_X = \sum_{i=1}^{h} G_X^{(i)}",
          "formulas.grad_multi_head.split"),
    )),
)

SECTIONS: tuple[Section, ...] = FORWARD + BACKWARD


def all_latex() -> list[str]:
    """Every LaTeX string of the sheet (for tests)."""
    return [f.latex for s in SECTIONS for f in s.formulas]


def note_keys() -> list[str]:
    """Every catalog key the sheet uses."""
    keys = [k for s in SECTIONS for k in (f"formulas.{s.key}.title", f"formulas.{s.key}.caption")]
    return keys + [f.note for s in SECTIONS for f in s.formulas if f.note]
