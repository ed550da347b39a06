"""Hand-friendly sizes and values per level (DESIGN §6).

Token axes are named as in attention_core: n for self-attention (n_q = n_k = n, a square score
matrix), n_q queries and n_k keys for kinds whose queries and keys differ (cross-attention, the KV
cache), whose score matrix is n_q × n_k.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LevelSpec:
    n: tuple[int, ...]  # token counts to draw from (self-attention: as many queries as keys)
    d_k: tuple[int, ...]  # key widths to draw from
    values: tuple[float, ...]  # entries of given matrices
    denominators: tuple[int, ...]  # of the simple fractions used for given attention weights
    decimals: int = 2  # places asked for non-integer answers
    n_q: tuple[int, ...] = ()  # query counts for rectangular kinds; () means the same as n (square)
    n_k: tuple[int, ...] = ()  # key counts for rectangular kinds; () means the same as n (square)

    def __post_init__(self) -> None:
        # frozen: the defaults are filled in once, through object.__setattr__
        if not self.n_q:
            object.__setattr__(self, "n_q", self.n)
        if not self.n_k:
            object.__setattr__(self, "n_k", self.n)


# n_q < n_k at every level, so any draw is a true rectangle and a causal (decoding) mask never hides a
# whole query row; a kind that wants more queries than keys swaps the two. An n_q × n_k matrix has no
# more cells than the level's largest square one.
LEVELS: dict[int, LevelSpec] = {
    1: LevelSpec(n=(2, 3), d_k=(1, 4), values=(0, 1, 2), denominators=(1, 2), n_q=(1, 2), n_k=(3,)),
    2: LevelSpec(n=(3,), d_k=(2, 4), values=(-2, -1, 0, 1, 2), denominators=(2, 4), n_q=(2,), n_k=(3, 4)),
    3: LevelSpec(n=(4,), d_k=(4, 8), values=tuple(np.arange(-2, 3.01, 0.5)), denominators=(2, 3, 4),
                 n_q=(2, 3), n_k=(4, 5)),
}


def spec(level: int) -> LevelSpec:
    return LEVELS[level]
