"""What a kind's generate() returns, and the helper that fills in reference answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import pipeline
from .model import Part
from .numbers import decimals_for


@dataclass
class Draft:
    """What a kind's generate() returns: the given values, the parts asked, prompt placeholders."""

    given: dict[str, Any]
    parts: list[Part]
    params: dict[str, Any] = field(default_factory=dict)


def reference_parts(given: dict[str, Any], names: list[str], decimals: int = 2,
                    env: dict[str, Any] | None = None) -> list[Part]:
    """Parts `names`, their references computed from `given` by the pipeline (attention_core's steps),
    or read from `env` when the caller has run it already (pipeline.run(given))."""
    env = pipeline.run(given) if env is None else env
    parts = []
    for name in names:
        ref = np.asarray(env[name], dtype=float)
        parts.append(Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals)))
    return parts
