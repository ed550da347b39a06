"""Backward through the embedding lookup X = E[token_ids]: G_E[t] = Σ of G_X[i] over positions i with token t.

Row t of E is copied into every position where token t appears, so each copy sends its gradient
row back and they add up; a token that does not appear gets a zero row.
"""

from __future__ import annotations

import numpy as np

from attention_core import embed

from ...draft import Draft, reference_parts
from ...levels import spec
from ...numbers import nonzero_matrix
from .._shared.contract import Formula, HomeStage, SheetSection
from .._shared.values import whole_values

ID = "grad_embedding"
ORDER = 250
VERSION = 1
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("embedding_grad_no_accumulate",)
SIZES = {1: (3, 3, 2), 2: (4, 3, 2), 3: (5, 4, 3)}  # (m, n, d): vocabulary, tokens, embedding width


def token_ids_with_repeat(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """n token ids from a vocabulary of m with at least one repeat, leaving at least one id unused."""
    while True:
        ids = rng.integers(m, size=n)  # (n,)
        distinct = len(set(ids.tolist()))
        if distinct < n and distinct < m:
            return ids


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    m, n, d = SIZES[level]
    given = {"token_ids": token_ids_with_repeat(rng, m, n),  # (n,)
             "E": nonzero_matrix(rng, (m, d), s.values),  # (m, d): its values do not enter G_E
             "G_X": nonzero_matrix(rng, (n, d), whole_values(level) if level < 3 else s.values)}  # (n, d)
    return Draft(given=given, parts=reference_parts(given, ["G_E"], s.decimals), params={"m": m, "n": n, "d": d})


def loss_for(token_ids):
    def loss(p: dict[str, np.ndarray]) -> float:
        """L = Σ X ⊙ G_X with X = E[token_ids]."""
        return float(np.sum(embed(token_ids, p["E"]) * p["G_X"]))
    return loss


LOSS_LATEX = r"\sum_{p,c} X_{pc} (G_X)_{pc}, \quad X_{p} = E[t_p]"


def solve(ex) -> list:
    """One entry of a repeated token's row collecting every position, the matrix form, a check."""
    from .._shared import backward as B

    v = B.values_of(ex)
    ids = [int(t) for t in ex.given["token_ids"]]
    token = max(set(ids), key=lambda t: (ids.count(t), -t))  # the most repeated token (smallest id on ties)
    c = B.largest(v["G_E"], rows=[token])[1]
    point = {"E": v["E"], "G_X": v["G_X"]}
    symbols = (rf"E[{token}]_{{{c + 1}}}", rf"G_E[{token}]_{{{c + 1}}}", f"E[{token}]_{c + 1}")  # ids from 0
    return B.assemble(ex, {"G_E": [B.chain_embedding(v, token, c, B.places_of(ex, "G_E"))]},
                      [B.check(ex, loss_for(ex.given["token_ids"]), LOSS_LATEX, point, "E", (token, c), "G_E",
                               symbols=symbols)])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("backward", r"G_E \mathrel{+}= G_X")
SHEET = SheetSection("backward", (
    Formula(r"[[G_E | m | d]], \qquad G_E[v] = \sum_{p:\, t_p = v} (G_X)_{p}",
            "formulas.grad_embedding.accumulate"),
))
