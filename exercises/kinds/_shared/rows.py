"""Worked steps of a softmax the step records know, for a row or matrix a kind computes itself (a row
divided by a temperature, a window's masked scores, ALiBi's biased scores): the registry's own softmax
builder on a stand-in `masked`, renamed to the kind's part."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ... import solutions
from ...core.model import Part
from ...i18n import Msg


def softmax_step(z: np.ndarray, part: Part, title: Msg, note: Msg | None = None) -> solutions.Step:
    """softmax(z) row by row (−∞ → weight 0), any cell derived, as the step of `part`."""
    ctx = solutions.build_context({"masked": np.asarray(z, dtype=float), "causal": False}, ["A"],
                                  places={"A": part.decimals}, values={"A": part.reference})
    step = solutions.BUILDERS["A"](ctx, "A")
    return replace(step, name=part.name, title=title, note=note or step.note, _memo={})
