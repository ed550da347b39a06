"""Backward through the embedding lookup X = E[token_ids]: G_E[t] = Σ of G_X[i] over positions i with token t.

Row t of E is copied into every position where token t appears, so each copy sends its gradient
row back and they add up; a token that does not appear gets a zero row.

Besides the catalogued overwrite of a repeated token's row (embedding_grad_no_accumulate, the
pipeline's), this kind names two mistakes of its own: G_X copied into G_E by position
(G_E[i] = G_X[i], as if token i were at position i) and token ids read as 1-based (id t sent to
row t − 1, which can only be done when no id is 0). The draws keep all of them apart from the answer
and from each other.
"""

from __future__ import annotations

import numpy as np

from attention_core import embed, embed_backward

from ...core import misconceptions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import nonzero_matrix
from .._shared import backward as B
from .._shared.values import whole_values

ID = "grad_embedding"
ORDER = 250
VERSION = 2
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("embedding_grad_no_accumulate",)
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("embedding_grad_by_position", "embedding_ids_one_based")
SIZES = {1: (3, 3, 2), 2: (4, 3, 2), 3: (5, 4, 3)}  # (m, n, d): vocabulary, tokens, embedding width


def token_ids_with_repeat(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """n token ids from a vocabulary of m with at least one repeat, leaving at least one id unused."""
    while True:
        ids = rng.integers(m, size=n)  # (n,)
        distinct = len(set(ids.tolist()))
        if distinct < n and distinct < m:
            return ids


def _draft(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    m, n, d = SIZES[level]
    given = {"token_ids": token_ids_with_repeat(rng, m, n),  # (n,)
             "E": nonzero_matrix(rng, (m, d), s.values),  # (m, d): its values do not enter G_E
             "G_X": nonzero_matrix(rng, (n, d), whole_values(level) if level < 3 else s.values)}  # (n, d)
    return Draft(given=given, parts=reference_parts(given, ["G_E"], s.decimals), params={"m": m, "n": n, "d": d})


def _overwritten(ids: np.ndarray, G_X: np.ndarray, m: int) -> np.ndarray:
    G_E = np.zeros((m, G_X.shape[1]))  # (m, d)
    G_E[ids] = G_X  # fancy assignment keeps only the last repeat (the catalog's embedding_grad_no_accumulate)
    return G_E


def mistakes_of(given: dict) -> dict[str, np.ndarray]:
    """{mistake id: the G_E it gives} for this kind's own mistakes that can be made on `given`."""
    ids = np.asarray(given["token_ids"], dtype=int)  # (n,)
    G_X = np.asarray(given["G_X"], dtype=float)  # (n, d)
    m = np.shape(given["E"])[0]
    found = {}
    if len(ids) <= m:  # row i of G_E gets row i of G_X: position taken for token id
        by_position = np.zeros((m, G_X.shape[1]))  # (m, d)
        by_position[:len(ids)] = G_X
        found["embedding_grad_by_position"] = by_position
    if ids.min() >= 1:  # id t read as the t-th row counting from 1: G_X[i] added to row t_i − 1
        found["embedding_ids_one_based"] = embed_backward(ids - 1, G_X, m)
    return found


def _apart(draft: Draft) -> bool:
    """The kind's mistakes and the catalogued overwrite differ from the answer and from each other."""
    part = draft.parts[0]
    alts = {**mistakes_of(draft.given), "embedding_grad_no_accumulate": _overwritten(
        np.asarray(draft.given["token_ids"], dtype=int), np.asarray(draft.given["G_X"], dtype=float),
        np.shape(draft.given["E"])[0])}
    return not misconceptions.clashes(part.reference, alts, misconceptions.separation(part))


def generate(rng: np.random.Generator, level: int) -> Draft:
    while True:
        draft = _draft(rng, level)
        if _apart(draft):
            return draft


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """This kind's own mistakes; None leaves the catalogued ones to the pipeline."""
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    if misconceptions.matches(value, part.reference, part.tolerance):
        return None
    for mid, alt in mistakes_of(ex.given).items():
        if misconceptions.matches(value, alt, tolerance):
            return mid
    return None


def loss_for(token_ids):
    def loss(p: dict[str, np.ndarray]) -> float:
        """L = Σ X ⊙ G_X with X = E[token_ids]."""
        return float(np.sum(embed(token_ids, p["E"]) * p["G_X"]))
    return loss


LOSS_LATEX = r"\sum_{p,c} X_{pc} (G_X)_{pc}, \quad X_{p} = E[t_p]"


def solve(ex) -> list:
    """One entry of a repeated token's row collecting every position, the matrix form, a check."""
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
