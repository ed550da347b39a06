"""Where a careful student can land: the interval "round what you write, then compute" reaches (DESIGN §4).

Every value a student writes may sit up to half a unit of its place either way: each computed value, and
inside a step the aids and intermediates (√d_k as the aid gives it, 1.414 or 1.41, or its reciprocal
0.707; eˣ from the table or to 2 places; the row sums r_i of the softmax gradient) and a given fraction
copied as a decimal (2/3 as 0.67). A cell's slack is how far all those roundings together can move it.

One walk: the kind's chain (the step records, or the kind's own) runs once on a stack whose slice 0 is
exact and whose slice k moves the k-th written cell by half a unit; every written value passes through
`Reach.write` (numbers.round_half_up hands it over), so no record and no kind needs an interval rule of
its own. A value's slack is Σ_k |slice k − slice 0|: the midpoint-radius form of interval arithmetic,
|J| ρ, with the Jacobian measured on the records themselves. Why this bound: it is exact for the linear
steps (sums, scaling, masks, copies), and for the products and the softmax it leaves out only terms in
ρ² (ρ ≤ a few hundredths: at most about 10⁻⁴, where one factor of a product is written and the other
given, as in these chains), which the grading tolerance 0.51·10⁻ᵈ keeps above half a unit covers. A
second walk counts the written cells first (the stack's height), so each run is one pass of numpy on
small stacks.

The exact key stays the reference; a cell is right within its tolerance plus its slack, and the sampler
redraws a problem whose catalogued mistake falls within that interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np


def _movable(value: np.ndarray, places: int) -> np.ndarray:
    """The cells a student may round: finite and not already a decimal of `places` places."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.asarray(value, dtype=float) * 10.0 ** places
        return np.isfinite(scaled) & (np.abs(scaled - np.round(scaled)) > 1e-7 * np.maximum(1.0, np.abs(scaled)))


class Reach:
    """The writer the chain rounds through: counting the written cells (first pass), then moving each by
    half a unit in its own slice of the stack (second pass, `Reach(places, plan)`)."""

    def __init__(self, places: int, plan: list[tuple[tuple[int, ...], np.ndarray]] | None = None):
        self.places = places
        self.half = 0.5 * 10.0 ** -places
        self.plan = [] if plan is None else plan  # per write: (its shape, its movable cells' flat indices)
        self.counting = plan is None
        self.height = 1 + sum(len(cells) for _, cells in self.plan)  # slice 0 exact, one slice per cell
        self.position = 0  # writes replayed so far
        self.next_slot = 1

    def write(self, value: Any) -> np.ndarray:
        """`value` as the student writes it: rounded while counting (the cells a careful student rounds: not a
        copy of a value already written), else stacked with each of those cells moved in its own slice."""
        value = np.asarray(value, dtype=float)
        if self.counting:
            self.plan.append((value.shape, np.flatnonzero(_movable(value, self.places))))
            return np.round(value, self.places)  # (which way a tie goes does not matter for what is movable)
        shape, cells = self.plan[self.position]
        self.position += 1
        if value.shape == shape:  # computed from exact values only: not stacked yet
            value = np.broadcast_to(value, (self.height, *shape))
        moved = np.array(value, dtype=float, order="C")  # (height, *shape); C order: `flat` below is a view
        first = self.next_slot
        flat = moved.reshape(self.height, -1)
        flat[first + np.arange(len(cells)), cells] += self.half
        self.next_slot += len(cells)
        return moved

    def aid(self, value: float, like: np.ndarray) -> np.ndarray:
        """An aid (√d_k ≈ 1.414) written once for every cell of `like` it divides: each cell's own slice."""
        shape = np.shape(like) if self.counting else self.plan[self.position][0]
        return self.write(np.full(shape, float(value)))

    def replay(self) -> Reach:
        """The moving writer for the writes this one counted."""
        return Reach(self.places, self.plan)


def written(value: Any, places: Any) -> Any:
    """A value written inside a step (an aid, eˣ, a row sum): moved when `places` is a Reach, else as it is."""
    return places.write(value) if isinstance(places, Reach) else value


def over_root(value: np.ndarray, d_k: int, rounding: Any) -> np.ndarray:
    """value / √d_k; in a reach run divided by √d_k as the aid gives it (≈ 1.414, or 1.41) unless it is whole."""
    root = math.sqrt(d_k)
    if not isinstance(rounding, Reach) or math.isqrt(d_k) ** 2 == d_k:
        return value / root
    return value / rounding.aid(root, like=value)


def softmax_by_hand(z: np.ndarray, rounding: Reach) -> np.ndarray:
    """Row-wise softmax as on paper: each eˣ read off the table and written, then divided by the row's sum
    (a row that sees no key gets weights 0)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        e = written(np.exp(z), rounding)  # (n_q, n_k)
        total = e.sum(axis=-1, keepdims=True)
        return np.where(total > 0, e / total, 0.0)


def slack(chain: Callable[[Any], Mapping[str, Any]], names: Mapping[str, tuple[int, ...]],
          places: int) -> dict[str, np.ndarray]:
    """{name: per-cell slack} of the values `names` ({name: shape}) that `chain(writer)` computes: how far
    the roundings of every value written on the way can move each cell, its own excepted: the last written
    cell that moves it one for one (itself, or the cell it copies). A value the chain does not compute, or
    computes from exact values only, has slack 0."""
    counting = Reach(places)
    chain(counting)
    moving = counting.replay()
    try:
        env = chain(moving)
    except (ValueError, IndexError):  # a chain that walks rows one at a time does not take a stack
        env = None
    if env is None or not _stacked(env, names, moving.height):
        env = _one_slice_at_a_time(chain, counting)
    out = {}
    for name, shape in names.items():
        value = env.get(name)
        out[name] = np.zeros(shape)
        if value is None or np.ndim(value) != len(shape) + 1 or np.shape(value)[1:] != tuple(shape) or len(value) < 2:
            continue
        value = np.asarray(value, dtype=float)
        with np.errstate(invalid="ignore"):
            moved = np.abs(value[1:] - value[0])  # (height − 1, *shape)
        moved = np.where(np.isfinite(moved), moved, 0.0)  # −∞ stays −∞
        one_for_one = np.abs(moved - moving.half) <= 1e-9 * moving.half  # (height − 1, *shape)
        last = len(moved) - 1 - np.argmax(one_for_one[::-1], axis=0)  # per cell: its own rounding
        own = np.take_along_axis(moved, last[None], axis=0)[0] * one_for_one.any(axis=0)
        out[name] = moved.sum(axis=0) - own  # the part's tolerance covers its own rounding
    return out


class _OneCell(Reach):
    """The moving writer for a chain that takes no stack: every write as it is, with only the cell of
    slice `slot` moved (slot 0: none)."""

    def __init__(self, places: int, plan: list[tuple[tuple[int, ...], np.ndarray]], slot: int):
        super().__init__(places, plan)
        self.slot = slot

    def write(self, value: Any) -> np.ndarray:
        shape, cells = self.plan[self.position]
        self.position += 1
        moved = np.array(np.broadcast_to(np.asarray(value, dtype=float), shape), dtype=float)
        k = self.slot - self.next_slot
        self.next_slot += len(cells)
        if 0 <= k < len(cells):
            moved.reshape(-1)[cells[k]] += self.half
        return moved


def _stacked(env: Mapping[str, Any], names: Mapping[str, tuple[int, ...]], height: int) -> bool:
    """Every value the chain computed is a stack of `height` slices, or one exact value."""
    return all(np.shape(env[name]) in ((height, *shape), tuple(shape)) for name, shape in names.items()
               if name in env)


def _one_slice_at_a_time(chain: Callable[[Any], Mapping[str, Any]], counting: Reach) -> dict[str, np.ndarray]:
    """The stack built slice by slice: the chain run once per written cell (fine for the small chains that
    walk their rows in a loop)."""
    runs = [chain(_OneCell(counting.places, counting.plan, slot)) for slot in range(counting.replay().height)]
    return {name: np.stack([np.asarray(run[name], dtype=float) for run in runs])
            for name in runs[0] if all(np.shape(run[name]) == np.shape(runs[0][name]) for run in runs)}


def of(ex: Any, chain: Callable[..., Mapping[str, Any]], places: int) -> dict[str, np.ndarray]:
    """{part name: per-cell slack} of an exercise: `chain` (its kind's, the grader's carry-forward) run from
    the given data, every value written to `places` (the exercise's declared places); a given value that is
    not a decimal of those places (2/3) is copied as one. Memoised on the (immutable) exercise."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "reach" not in memo:
        copied = [name for name, v in ex.given.items()
                  if isinstance(v, np.ndarray) and v.dtype.kind == "f" and _movable(v, places).any()]

        def run(writer: Reach) -> Mapping[str, Any]:
            return chain(ex, {name: writer.write(ex.given[name]) for name in copied}, writer)

        names = {p.name: p.shape for p in ex.parts if not p.is_choice}
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            memo["reach"] = slack(run, names, places)
    return memo["reach"]
