"""The misconception catalog: each entry is a wrong computation that the pipeline can make.

After grading, every misconception that applies to a part is recomputed from the exercise's given
data (``pipeline.run`` with that one mistake). If the learner's value matches it and not the
reference, the feedback names it. An explanation for each id is in the message catalog under
``misconception.<id>``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from . import pipeline
from .model import Exercise, Part

MisconceptionId = Literal[
    "transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle",
    "no_mask", "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed",
    "grad_a_transposed", "grad_v_no_transpose", "softmax_grad_missing_term", "grad_scores_no_scale",
    "grad_k_no_transpose", "embedding_grad_no_accumulate",
]
CATALOG: tuple[str, ...] = MisconceptionId.__args__  # in the order of DESIGN §5

DIAGNOSIS_TOLERANCE = 0.51e-2  # a wrong method rounded to 2 decimals is still recognised


def alternatives(ex: Exercise) -> dict[str, dict[str, np.ndarray]]:
    """{misconception id: {part name: the value that mistake gives}} for the mistakes that apply.

    Memoised on the exercise (exercises are immutable)."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "alternatives" not in memo:
        wanted = set(ex.part_names)
        found: dict[str, dict[str, np.ndarray]] = {}
        for mid in CATALOG:
            env = pipeline.run(ex.given, mistakes={mid}, until=wanted)
            if not env.used:
                continue  # the mistake is not on the way to any part of this exercise
            values = {name: env[name] for name in wanted if name in env.tainted}
            if values:
                found[mid] = values
        memo["alternatives"] = found
    return memo["alternatives"]


def matches(value: np.ndarray, target: np.ndarray, tolerance: float) -> bool:
    """Same shape and every cell within tolerance (−∞ only matches −∞; NaN matches nothing)."""
    value, target = np.asarray(value, dtype=float), np.asarray(target, dtype=float)
    if value.shape != target.shape or np.isnan(target).any():
        return False
    return bool(np.all(cell_matches(value, target, tolerance)))


def cell_matches(value: np.ndarray, target: np.ndarray, tolerance: float) -> np.ndarray:
    """Per-cell closeness with infinities compared exactly."""
    value, target = np.asarray(value, dtype=float), np.asarray(target, dtype=float)
    both_inf = np.isinf(value) & np.isinf(target) & (np.sign(value) == np.sign(target))
    finite = np.isfinite(value) & np.isfinite(target)
    with np.errstate(invalid="ignore"):
        close = np.abs(np.where(finite, value - target, 0.0)) <= tolerance
    return both_inf | (finite & close)


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """The id of the misconception that explains `value` for `part`, or None."""
    tolerance = max(part.tolerance, DIAGNOSIS_TOLERANCE)
    if matches(value, part.reference, part.tolerance):
        return None
    for mid, values in alternatives(ex).items():
        if part.name in values and matches(value, values[part.name], tolerance):
            return mid
    return None


def collisions(ex: Exercise) -> list[tuple[str, str]]:
    """(misconception, part) pairs where the mistake gives the right answer: such a variant cannot
    tell the mistake apart and is redrawn by the generator."""
    found = []
    for mid, values in alternatives(ex).items():
        for name, alt in values.items():
            part = ex.part(name)
            if matches(alt, part.reference, max(part.tolerance, DIAGNOSIS_TOLERANCE)):
                found.append((mid, name))
    return found
