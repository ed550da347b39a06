"""Hand-friendly sizes and values per level (DESIGN §6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LevelSpec:
    n: tuple[int, ...]  # token counts to draw from
    d_k: tuple[int, ...]  # key widths to draw from
    values: tuple[float, ...]  # entries of given matrices
    denominators: tuple[int, ...]  # of the simple fractions used for given attention weights
    decimals: int = 2  # places asked for non-integer answers


LEVELS: dict[int, LevelSpec] = {
    1: LevelSpec(n=(2, 3), d_k=(1, 4), values=(0, 1, 2), denominators=(1, 2)),
    2: LevelSpec(n=(3,), d_k=(2, 4), values=(-2, -1, 0, 1, 2), denominators=(2, 4)),
    3: LevelSpec(n=(4,), d_k=(4, 8), values=tuple(np.arange(-2, 3.01, 0.5)), denominators=(2, 3, 4)),
}


def spec(level: int) -> LevelSpec:
    return LEVELS[level]
