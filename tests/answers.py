"""Answers near an exercise's references, for checks that compare two ways of judging them."""

from __future__ import annotations

import numpy as np


def near_answers(ex, rng):
    """Values near the references: some cells off, some −∞, some of another sign (six answers)."""
    for _ in range(6):
        values = {}
        for part in ex.parts:
            value = np.array(part.reference, dtype=float)
            if rng.random() < 0.6:
                value = value + rng.choice([0.0, 0.004, -0.3, 1.0, -1.0], size=part.shape)
            if rng.random() < 0.2:
                value[tuple(rng.integers(s) for s in part.shape)] = rng.choice([-np.inf, 2.0, -1.0, 0.0])
            if rng.random() < 0.1:
                value = -value
            values[part.name] = value
        yield values
