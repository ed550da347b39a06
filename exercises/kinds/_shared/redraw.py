"""The engine's redraw test (misconceptions.collisions) answered early, inside a kind's generate.

A variant where a guarded mistake gives the right answer, or the same answer as another guarded
mistake, is refused by the engine, which then calls the kind's generate again on the same generator.
A kind that computes some of those mistakes' values itself (the same expressions the step registry
uses) can refuse such a variant before it builds the whole draft, and take the next one from the
generator as the engine's redraw would: the exercises stay the same, and a refused variant costs a
few products instead of a draft and a run of every guarded mistake. Only a subset of the mistakes may
be checked (the engine still checks them all), but every mistake checked must apply as the registry
says, or a variant the engine would keep is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ...core import misconceptions


def clash(reference: np.ndarray, values: Iterable[np.ndarray], gap: float) -> bool:
    """bool(misconceptions.clashes(reference, {id: value …}, gap)) for values of the reference's shape:
    some value within `gap` of the reference in every cell, or of another value."""
    ref = np.asarray(reference, dtype=float).reshape(-1)
    rows = [np.asarray(v, dtype=float) for v in values]
    if not rows:
        return False
    if any(r.size != ref.size for r in rows):
        raise ValueError("clash: every value must have the reference's shape")
    block = np.array(rows).reshape(len(rows), -1)  # (values, cells)
    block = block[~np.isnan(block).any(axis=1)]  # a value no one can write names nothing
    if len(block) == 0:
        return False
    if block.shape[1] == 0:
        return True  # an empty value is never far from the reference
    infinite, ref_infinite = np.isinf(block), np.isinf(ref)
    if infinite.any() or ref_infinite.any():  # −∞ as clashes compares it: equal to −∞, far from any number
        block = np.where(infinite, np.sign(block) * misconceptions._INFINITY_STAND_IN, block)
        ref = np.where(ref_infinite, np.sign(ref) * misconceptions._INFINITY_STAND_IN, ref)
    if (np.abs(block - ref).max(axis=1) <= gap).any():
        return True
    if len(block) < 2:
        return False
    widest = np.abs(block[:, None, :] - block[None, :, :]).max(axis=-1)  # (values, values)
    return bool(np.triu(widest <= gap, k=1).any())


def collides(parts: Mapping[str, object], by_part: Mapping[str, Mapping[str, np.ndarray]]) -> bool:
    """bool(misconceptions.collisions(…)) from the mistakes' values by part ({part: {id: value}}):
    `parts` maps a part's name to its Part (its reference and its separation)."""
    for name, alts in by_part.items():
        part = parts[name]
        values = [v for v in alts.values() if np.shape(v) == part.shape]
        if clash(part.reference, values, misconceptions.separation(part)):
            return True
    return False
