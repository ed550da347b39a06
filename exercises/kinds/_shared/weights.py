"""Given attention weights that are a real softmax, and the scores they come from, as the prompt shows them."""

from __future__ import annotations

import numpy as np

from ...core.numbers import softmax_counts


def score_text(count: int) -> str:
    """ln c as written by hand: 0 for c = 1, −∞ for a masked key (c = 0)."""
    return {0: "−∞", 1: "0"}.get(int(count), f"ln {int(count)}")


def scores_behind(A: np.ndarray) -> str:
    """The (masked) scores whose row-wise softmax is A, one row after another: "[0, ln 2; 0, −∞]"."""
    rows = ["[" + ", ".join(score_text(c) for c in row) + "]" for row in softmax_counts(A)]
    return "[" + "; ".join(r[1:-1] for r in rows) + "]"


def scores_text(counts: np.ndarray) -> str:
    """scores_behind(A) from A's whole counts in lowest terms row by row (softmax_counts(A)), when a kind
    built A from them: the same text without recovering the fractions."""
    return "[" + "; ".join(", ".join(score_text(c) for c in row) for row in np.asarray(counts)) + "]"
