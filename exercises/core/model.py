"""The data an exercise is made of: frozen, plain, and round-tripping through JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# ---------------------------------------------------------------- JSON conversion
# −∞ is written as the string "-inf"; matrices are plain nested lists.


def to_jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if math.isinf(value):
            return "-inf" if value < 0 else "inf"
        return float(value)
    return value


def _leaves(value: Any):
    if isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def from_jsonable(value: Any) -> Any:
    """Lists of numbers become arrays (int arrays when every leaf is an int); the rest stays."""
    if isinstance(value, list):
        leaves = list(_leaves(value))
        if leaves and all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in leaves):
            if all(isinstance(v, int) for v in leaves):
                return _frozen(np.array(value, dtype=int))
            return _frozen(np.array(_floats(value), dtype=float))
        return value
    if isinstance(value, str) and value in ("-inf", "inf"):
        return float(value)
    return value


def _floats(value: Any) -> Any:
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return float(value)  # "-inf" -> -inf


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def freeze(value: Any) -> Any:
    """Arrays inside an exercise are read-only: an exercise can be shared and cached safely."""
    if isinstance(value, np.ndarray):
        return _frozen(np.array(value))
    return value


# ---------------------------------------------------------------- the records


@dataclass(frozen=True, eq=False)
class Part:
    """One thing the learner must give: a matrix of `shape`, right to `decimals` places.

    decimals == 0 means every cell is an integer and must be exact. A part with `options` is a
    multiple-choice question: the answer is the index of an option, and `reference` is [[index]].
    """

    name: str
    shape: tuple[int, int]
    reference: np.ndarray
    decimals: int = 2
    options: tuple[str, ...] | None = None  # catalog keys (or literal text) of the choices
    prompt: str | None = None  # catalog key of this part's own question, if it has one
    params: dict[str, Any] = field(default_factory=dict)  # placeholders for prompt and options

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "reference", freeze(np.asarray(self.reference, dtype=float)))
        if self.options is not None:
            object.__setattr__(self, "options", tuple(self.options))
        if self.reference.shape != self.shape:
            raise ValueError(f"part {self.name}: reference shape {self.reference.shape} != {self.shape}")

    @property
    def is_choice(self) -> bool:
        return self.options is not None

    @property
    def tolerance(self) -> float:
        """0.51 × 10^-d: 0.67 and 0.667 are right for 2/3 at two decimals, 0.66 is not."""
        return 1e-9 if self.decimals == 0 else 0.51 * 10.0 ** (-self.decimals)

    def to_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "shape": list(self.shape), "decimals": self.decimals,
             "reference": to_jsonable(self.reference)}
        if self.options is not None:
            d["options"] = list(self.options)
        if self.prompt is not None:
            d["prompt"] = self.prompt
        if self.params:
            d["params"] = to_jsonable(self.params)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Part:
        return cls(name=d["name"], shape=tuple(d["shape"]), decimals=int(d.get("decimals", 2)),
                   reference=np.array(_floats(d["reference"]), dtype=float),
                   options=tuple(d["options"]) if d.get("options") is not None else None,
                   prompt=d.get("prompt"), params=d.get("params", {}))


# given values a kind has renamed since it stored exercises: {kind: {old name: its name now}}, entered by the
# engine from each kind's RENAMED as it discovers them, so an exercise read back names its values as today
RENAMED_GIVEN: dict[str, dict[str, str]] = {}


@dataclass(frozen=True, eq=False)
class Exercise:
    """A generated problem: what is given, what is asked, and how it was made."""

    kind: str
    seed: int
    level: int
    version: int  # the kind's generator version: same (kind, seed, level, version) → same exercise
    given: dict[str, Any]  # matrices (read-only arrays), numbers and flags, named as in DESIGN §3.1
    parts: tuple[Part, ...]
    params: dict[str, Any] = field(default_factory=dict)  # placeholders for the prompt

    def __post_init__(self):
        object.__setattr__(self, "given", {k: freeze(v) for k, v in self.given.items()})
        object.__setattr__(self, "parts", tuple(self.parts))

    @property
    def id(self) -> str:
        return f"{self.kind}-L{self.level}-s{self.seed}"

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def part_names(self) -> list[str]:
        return [p.name for p in self.parts]

    def matrices(self) -> dict[str, np.ndarray]:
        """The given matrices (2-D arrays) in the order the exercise lists them."""
        return {k: v for k, v in self.given.items() if isinstance(v, np.ndarray) and v.ndim == 2}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "seed": self.seed, "level": self.level, "version": self.version,
                "given": to_jsonable(self.given), "parts": [p.to_dict() for p in self.parts],
                "params": to_jsonable(self.params)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Exercise:
        renamed = RENAMED_GIVEN.get(d["kind"], {})
        return cls(kind=d["kind"], seed=int(d["seed"]), level=int(d["level"]), version=int(d["version"]),
                   given={renamed.get(k, k): from_jsonable(v) for k, v in d["given"].items()},
                   parts=tuple(Part.from_dict(p) for p in d["parts"]),
                   params={k: from_jsonable(v) for k, v in d.get("params", {}).items()})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Exercise) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.kind, self.seed, self.level, self.version))


def declared_decimals(ex: Exercise) -> int:
    """The places an exercise asks for: its parts' largest decimals, 2 when every part is whole
    (the places its unasked intermediates are rounded to under "round what you write")."""
    return max([p.decimals for p in ex.parts] + [0]) or 2
