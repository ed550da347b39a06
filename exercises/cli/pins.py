"""Golden pins: a fingerprint of every kind × level × seed 0–29, so that no exercise changes unnoticed.

A fingerprint hashes what a learner is shown and graded against: the given values and, per part, its
name, shape, decimals and reference (rounded to 9 decimals, so a last-bit difference between machines
is not a change). The committed file records each kind's VERSION beside its fingerprints: an exercise
that changes while its kind's VERSION does not is a silent change, and the pins test fails on it. A
deliberate change bumps VERSION and rewrites the file (`python -m exercises.cli.pins --write`).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

from ..core.engine import KINDS, generate
from ..core.model import Exercise, to_jsonable

SEEDS = range(30)
PINS_PATH = Path(__file__).resolve().parents[2] / "tests" / "pins" / "exercises.json"


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        rounded = round(value, 9)
        return 0.0 if rounded == 0 else rounded  # −0.0 and 0.0 are the same number to a learner
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    return value


def fingerprint(ex: Exercise) -> str:
    """A short hash of the exercise's given values and of each part's name, shape, decimals, reference."""
    body = {"given": to_jsonable(ex.given),
            "parts": [{"name": p.name, "shape": list(p.shape), "decimals": p.decimals,
                       "reference": to_jsonable(p.reference)} for p in ex.parts]}
    text = json.dumps(_canonical(body), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def compute(kinds: dict | None = None) -> dict[str, dict[str, Any]]:
    """{kind: {"version": V, "levels": {level: [fingerprint of seed 0, 1, …]}}} for the kinds now."""
    kinds = KINDS if kinds is None else kinds
    return {kind_id: {"version": kind.VERSION,
                      "levels": {str(level): [fingerprint(generate(kind_id, seed, level)) for seed in SEEDS]
                                 for level in kind.LEVELS}}
            for kind_id, kind in kinds.items()}


def load(path: Path = PINS_PATH) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


def silent_changes(pinned: dict, current: dict) -> list[str]:
    """Exercises that differ from their pins while their kind's VERSION is the pinned one."""
    found = []
    for kind_id, now in current.items():
        old = pinned.get(kind_id)
        if old is None or old["version"] != now["version"]:
            continue  # a new kind, or a deliberate bump: see stale()
        for level, prints in now["levels"].items():
            before = old["levels"].get(level, [])
            found += [f"{kind_id} level {level} seed {seed}" for seed, (a, b) in enumerate(zip(before, prints))
                      if a != b]
            if len(before) != len(prints):
                found.append(f"{kind_id} level {level}: {len(before)} pinned seeds, {len(prints)} now")
        if set(old["levels"]) != set(now["levels"]):
            found.append(f"{kind_id}: levels {sorted(old['levels'])} pinned, {sorted(now['levels'])} now")
    return found


def stale(pinned: dict, current: dict) -> list[str]:
    """Kinds whose pins no longer describe the code: new, removed, or VERSION bumped without rewriting."""
    found = [f"{k}: not pinned" for k in current if k not in pinned]
    found += [f"{k}: pinned but no longer a kind" for k in pinned if k not in current]
    found += [f"{k}: VERSION {current[k]['version']}, pins written for {pinned[k]['version']}"
              for k in current if k in pinned and pinned[k]["version"] != current[k]["version"]]
    return found


def write(path: Path = PINS_PATH) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []  # one line per kind and level, so a diff names the levels that changed
    for kind_id, pins in compute().items():
        levels = ",\n".join(f'  "{level}": {json.dumps(prints)}' for level, prints in pins["levels"].items())
        lines.append(f'"{kind_id}": {{"version": {pins["version"]}, "levels": {{\n{levels}}}}}')
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
        print(f"wrote {PINS_PATH}")
    else:
        current, pinned = compute(), load()
        problems = silent_changes(pinned, current) + stale(pinned, current)
        print("\n".join(problems) or "pins hold")
        sys.exit(1 if problems else 0)
