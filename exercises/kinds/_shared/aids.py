"""Hand-calculation aids for kinds whose parts the pipeline does not know (heads, two softmax scales).

The eˣ table of each softmax on the way is the generic one (solutions.generic_aids) for a stand-in
exercise with that softmax's inputs; the tables are merged, each exponent listed once.
"""

from __future__ import annotations

import numpy as np

from ... import solutions
from ...core import pipeline
from ...core.model import Exercise, Part


def softmax_aids(ex: Exercise, inputs: list[dict], sqrt_dk: str | None = None) -> solutions.Aids:
    """The eˣ table for the softmax of each entry of `inputs` (pipeline given values), merged."""
    entries: dict[float, solutions.ExpEntry] = {}
    caption = None
    for given in inputs:
        A = pipeline.run(given)["A"]  # (n, n)
        stand_in = Exercise(kind=ex.kind, seed=ex.seed, level=ex.level, version=ex.version, given=given,
                            parts=(Part(name="A", shape=np.shape(A), reference=A),))
        one = solutions.generic_aids(stand_in)
        caption = caption or one.exp_caption  # the level's grid: the same for every softmax on the way
        for entry in one.exp_table:
            entries.setdefault(round(entry.x, 9), entry)
    return solutions.Aids(exp_table=tuple(e for _, e in sorted(entries.items())), sqrt_dk=sqrt_dk,
                          shapes=solutions.shapes_of(ex), exp_caption=caption)
