"""Small values the backward kinds draw their incoming gradients from."""

from __future__ import annotations

from ...core.levels import spec


def whole_values(level: int) -> tuple[int, ...]:
    """The level's range without halves: incoming gradients G_O are small integers."""
    return tuple(int(v) for v in spec(level).values if float(v).is_integer())
