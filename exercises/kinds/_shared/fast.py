"""Fast paths for the generators' redraws (issue 14: generate + grade ≤ 2 ms): the same decisions as the
general helpers, at a fraction of their cost.

- `clash_free`, `all_clash_free`: yes/no forms of misconceptions.clashes (misconceptions.any_clash). The
  redraw only asks whether some mistake of a part cannot be told apart (from the answer or from another
  mistake), not which, and stops at the first clash.
- `apart_from`: every mistake apart from one value (misconceptions.apart for a whole batch at once).

tests/test_kinds_decoder_fast.py holds each to the helper it stands for.
"""

from __future__ import annotations

import math

import numpy as np

from ...core import misconceptions
from ...core.numbers import round_half_up


def clash_free(reference: np.ndarray, alts, gap: float = misconceptions.GAP) -> bool:
    """No value of `alts` (values, or {id: value}) is within `gap` of the reference in every cell, nor
    within `gap` of another of the same shape: not misconceptions.any_clash."""
    return not misconceptions.any_clash(reference, alts, gap)


def all_clash_free(parts, mistakes: dict[str, dict]) -> bool:
    """hand.all_apart with the mistakes computed beforehand ({part name: {id: value}}): every part's own
    mistakes differ from its answer and from each other."""
    return all(clash_free(p.reference, mistakes.get(p.name, {}), misconceptions.separation(p)) for p in parts)


def apart_from(target: np.ndarray, alts, gap: float) -> bool:
    """Every value of `alts` of the target's shape is apart from it (misconceptions.apart: some cell
    differs by more than `gap`, or is ∞ in one and not the other)."""
    target = np.asarray(target, dtype=float)
    same = [np.asarray(a, dtype=float) for a in (alts.values() if isinstance(alts, dict) else alts)
            if np.shape(a) == target.shape]
    if not same:
        return True
    block = np.array(same)  # (k, *shape)
    if np.isfinite(block).all() and np.isfinite(target).all():  # cell_matches without infinities
        close = np.abs(block - target) <= gap
    else:
        close = misconceptions.cell_matches(block, target, gap)
    return not bool(close.reshape(len(same), -1).all(axis=1).any())


def rounded(values: np.ndarray, places: int) -> np.ndarray:
    """numbers.round_half_up(values, places) of a float array, the common case without its overhead: every
    cell finite and none within 1e-6 of a half at these places, each cell the nearest of its scaled
    neighbours (the same operations, cell by cell in plain Python for a few cells); anything else
    through round_half_up itself. The same floats (tests/test_kinds_kv_cache_constructive.py)."""
    array = np.asarray(values, dtype=float)
    scale = 10.0 ** int(places)
    if array.size > 16:
        scaled = np.abs(array) * scale
        if not (np.isfinite(scaled).all() and scaled.max(initial=0.0) < 2.0**52) \
                or (np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6).any():
            return round_half_up(array, places)
        return np.sign(array) * np.floor(scaled + 0.5) / scale + 0.0
    out = []
    for x in array.ravel().tolist():
        scaled = abs(x) * scale
        if not scaled < 2.0**52 or abs(scaled - math.floor(scaled) - 0.5) < 1e-6:  # NaN, ∞, huge, a half
            return round_half_up(array, places)
        out.append(math.copysign(math.floor(scaled + 0.5) / scale, x) + 0.0 if x else 0.0)
    return np.array(out).reshape(array.shape)
