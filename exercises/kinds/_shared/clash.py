"""A yes/no form of misconceptions.clashes for a generator's redraw (issue 14: generate + grade ≤ 2 ms).

The redraw only asks whether some mistake of a part cannot be told apart (from the answer or from another
mistake), not which: `clash_free` decides exactly as `not misconceptions.clashes(...)` does (the same
differences, compared with the same gap; NaN values left out, ±∞ compared through the same stand-in),
and stops at the first clash. tests/test_kinds_decoder_fast.py holds the two to the same answer.
"""

from __future__ import annotations

import functools

import numpy as np

from ...core import misconceptions


@functools.lru_cache(maxsize=64)
def _upper(k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(k, 1)


def clash_free(reference: np.ndarray, alts, gap: float = misconceptions.GAP) -> bool:
    """No value of `alts` (values, or {id: value}) is within `gap` of the reference in every cell, nor
    within `gap` of another of the same shape."""
    groups: dict[tuple, list[np.ndarray]] = {}
    for alt in (alts.values() if isinstance(alts, dict) else alts):
        value = np.asarray(alt, dtype=float)
        if not np.isfinite(value).all():
            if np.isnan(value).any():
                continue  # no one can write it
            value = misconceptions._comparable(value)
        groups.setdefault(value.shape, []).append(value.reshape(-1))
    ref = np.asarray(reference, dtype=float)
    if not np.isfinite(ref).all():
        ref = misconceptions._comparable(ref)
    for shape, values in groups.items():
        block = np.array(values)  # (k, cells)
        if shape == ref.shape and bool((np.abs(block - ref.reshape(-1)).max(axis=1, initial=0.0) <= gap).any()):
            return False
        k = len(values)
        if k > 1:
            i, j = _upper(k)
            if bool((np.abs(block[i] - block[j]).max(axis=1, initial=0.0) <= gap).any()):
                return False
    return True


def all_clash_free(parts, mistakes: dict[str, dict]) -> bool:
    """hand.all_apart with the mistakes computed beforehand ({part name: {id: value}}): every part's own
    mistakes differ from its answer and from each other."""
    return all(clash_free(p.reference, mistakes.get(p.name, {}), misconceptions.separation(p)) for p in parts)
