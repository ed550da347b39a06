"""Fast paths for the generators' redraws (issue 14: generate + grade ≤ 2 ms): the same draws from the rng
and the same decisions as the general helpers, at a fraction of their cost.

- `clash_free`: a yes/no form of misconceptions.clashes. The redraw only asks whether some mistake of a
  part cannot be told apart (from the answer or from another mistake), not which: it decides exactly as
  `not misconceptions.clashes(...)` (the same differences, compared with the same gap; NaN values left
  out, ±∞ compared through the same stand-in) and stops at the first clash.
- `apart_from`: every mistake apart from one value (misconceptions.apart for a whole batch at once).
- `nonzero_matrix`: numbers.nonzero_matrix with the same calls to the rng (so the same matrices).

tests/test_kinds_decoder_fast.py holds each to the helper it stands for.
"""

from __future__ import annotations

import functools

import numpy as np

from ...core import misconceptions


@functools.lru_cache(maxsize=64)
def _values(values: tuple) -> tuple[np.ndarray, bool]:
    options = np.asarray(values, dtype=float)
    options.setflags(write=False)
    return options, bool((options == 0).any())


def nonzero_matrix(rng: np.random.Generator, shape: tuple[int, int], values: tuple) -> np.ndarray:
    """numbers.nonzero_matrix (entries from `values`, redrawn until no row and no column is all zeros),
    drawing exactly as it does; `values` a tuple (without 0 in it, the first draw is kept)."""
    options, has_zero = _values(values)
    while True:
        M = options[rng.integers(len(options), size=shape)]
        if not has_zero:
            return M
        if 1 in shape:  # a row or a column: no line all zeros is no zero at all
            if M.all():
                return M
            continue
        nonzero = M != 0
        if nonzero.any(axis=1).all() and nonzero.any(axis=0).all():
            return M


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
