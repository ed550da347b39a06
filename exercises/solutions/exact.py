"""Exact values of a solution: the given numbers as sympy numbers, each step's exact rule from the
step registry, and an exact cell kept only where it agrees with the reference value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core.steps import STEP_BY_NAME, STEPS, Product
from ..rendering import latex as L

PRODUCTS: dict[str, Product] = {s.name: s.product for s in STEPS if s.product is not None}
SCALES: dict[str, str] = {s.name: s.scales for s in STEPS if s.scales is not None}  # value ÷ √d_k ← its input


def _oriented(M: np.ndarray, transpose: bool) -> np.ndarray:
    return M.T if transpose else M


def _exact_given(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 2:
        out = np.empty(value.shape, dtype=object)  # same shape as the given matrix
        for idx, x in np.ndenumerate(value):
            out[idx] = L.to_exact(x)
        return out
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return L.to_exact(float(value))
    return None


def _exact_step(name: str, xs: dict, values: Mapping[str, Any]) -> Any:
    """The exact value of step `name` from the exact values so far (None cells unknown), by the
    registry's exact rule; None for a step without one (decimals only)."""
    step = STEP_BY_NAME.get(name)
    return step.exact(xs, values) if step is not None and step.exact is not None else None


def _agreeing(xm: Any, ref: Any) -> Any:
    """Keep an exact cell only where it equals the reference value (to 1e-9)."""
    if not isinstance(xm, np.ndarray) or not isinstance(ref, np.ndarray) or xm.shape != np.shape(ref):
        return np.full(np.shape(ref), None, dtype=object) if isinstance(ref, np.ndarray) else None
    out = xm.copy()
    for idx, e in np.ndenumerate(xm):
        if e is None:
            continue
        try:
            f = float(e)
        except (TypeError, ValueError):
            out[idx] = None
            continue
        r = float(ref[idx])
        same = (f == r) if (math.isinf(f) or math.isinf(r)) else abs(f - r) <= 1e-9 * max(1.0, abs(r))
        if not same:
            out[idx] = None
    return out
