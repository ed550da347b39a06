"""Fast paths for the generators' redraws (issue 14: generate + grade ≤ 2 ms): the same decisions as the
general helpers, at a fraction of their cost.

- `clash_free`, `all_clash_free`: yes/no forms of misconceptions.clashes (misconceptions.any_clash). The
  redraw only asks whether some mistake of a part cannot be told apart (from the answer or from another
  mistake), not which, and stops at the first clash.
- `apart_from`: every mistake apart from one value (misconceptions.apart for a whole batch at once).

tests/test_fast_paths.py holds each to the helper it stands for.
"""

from __future__ import annotations

import numpy as np

from ...core import misconceptions


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
