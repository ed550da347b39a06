"""The kind registry and the deterministic generator.

A kind is a module in ``exercises/kinds/`` with the same small surface:

    ID: str            the kind id of DESIGN §3.3
    ORDER: int         where it sits in menus
    VERSION: int       bump when generated exercises change
    LEVELS: tuple      the levels it offers
    generate(rng, level) -> Draft

Randomness only comes from the injected generator, seeded from (kind, seed, level), so the same
triple gives the same exercise in any process on any machine.
"""

from __future__ import annotations

import importlib
import pkgutil
import zlib
from types import ModuleType
from typing import Any

import numpy as np

from . import kinds as _kinds_pkg
from . import misconceptions
from .model import Exercise

MAX_SEED = 2**53  # seeds travel through URLs and JSON: keep them exact in JavaScript too
MAX_REDRAWS = 200


def _discover() -> dict[str, ModuleType]:
    found = []
    for info in pkgutil.iter_modules(_kinds_pkg.__path__):
        module = importlib.import_module(f"{_kinds_pkg.__name__}.{info.name}")
        if hasattr(module, "ID") and hasattr(module, "generate"):
            found.append(module)
    found.sort(key=lambda m: (getattr(m, "ORDER", 1000), m.ID))
    return {m.ID: m for m in found}


KINDS: dict[str, ModuleType] = _discover()


def rng_for(kind_id: str, seed: int, level: int) -> np.random.Generator:
    """The generator for one variant: a stable hash of the kind id, the level and the seed."""
    return np.random.default_rng(np.random.SeedSequence([zlib.crc32(kind_id.encode()), level, seed]))


def validate(kind_id: str, seed: Any, level: Any) -> tuple[str, int, int]:
    """Check a (kind, seed, level) triple; raise ValueError with a plain message if it is not valid."""
    if kind_id not in KINDS:
        raise ValueError(f"unknown kind {kind_id!r}; known kinds: {', '.join(KINDS)}")
    try:
        seed, level = int(seed), int(level)
    except (TypeError, ValueError):
        raise ValueError("seed and level must be whole numbers") from None
    if not 0 <= seed < MAX_SEED:
        raise ValueError(f"seed must be between 0 and {MAX_SEED - 1}")
    if level not in KINDS[kind_id].LEVELS:
        raise ValueError(f"level must be one of {', '.join(map(str, KINDS[kind_id].LEVELS))} for {kind_id}")
    return kind_id, seed, level


def generate(kind_id: str, seed: int = 0, level: int = 1) -> Exercise:
    """The exercise (kind, seed, level). Variants where a catalogued mistake would give the right
    answer are redrawn from the same generator, so the result stays deterministic."""
    kind_id, seed, level = validate(kind_id, seed, level)
    kind = KINDS[kind_id]
    rng = rng_for(kind_id, seed, level)
    for _ in range(MAX_REDRAWS):
        draft = kind.generate(rng, level)
        ex = Exercise(kind=kind_id, seed=seed, level=level, version=kind.VERSION,
                      given=draft.given, parts=tuple(draft.parts), params=draft.params)
        if not misconceptions.collisions(ex):
            return ex
    raise RuntimeError(f"{kind_id}: no distinguishable variant in {MAX_REDRAWS} draws (seed {seed}, level {level})")
