"""How long problems take by hand, by the operation count (exercises.core.budget), beside the page's figure.

    python bench/bench_minutes.py                      # a few problems of the heavy kinds, and the two problems
                                                       # a review timed by hand, as Markdown tables
    python bench/bench_minutes.py --medians --seeds 20  # median and largest minutes of every kind and level

The page's figure is engine.about_minutes (the count rounded up to a whole minute): what Practice shows. The
problems timed by hand are stored as they were worked (tests/kinds/stored/stopwatch.json), counted with
today's rates beside their stopwatch times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import exercises  # noqa: E402
from exercises.core import budget, engine  # noqa: E402

HEAVY = (("backprop", 3), ("backprop_loss", 3), ("multi_head", 3), ("attention", 3))
REVIEWED = Path(__file__).resolve().parents[1] / "tests" / "kinds" / "stored" / "stopwatch.json"


def problems(seeds: range) -> None:
    print("| problem | cells written | multiply-adds (digit products more) | additions | eˣ | counted | page |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, level in HEAVY:
        for seed in seeds:
            ex = exercises.generate(kind, seed, level)
            o = engine.operations(ex)
            print(f"| {kind} level {level} seed {seed} | {o.cells} | {o.multiply_adds} ({o.product_digits}) | "
                  f"{o.additions} | {o.exponentials} | {o.minutes:.1f} min | about {engine.about_minutes(ex)} min |")


def reviewed() -> None:
    print("| problem (as it was timed) | by hand | counted now | page now |")
    print("| --- | --- | --- | --- |")
    for problem, stored in json.loads(REVIEWED.read_text()).items():
        ex = exercises.Exercise.from_dict(stored["exercise"])
        print(f"| {problem} | ~{stored['hand_minutes']} min | {engine.minutes(ex):.1f} min | "
              f"about {engine.about_minutes(ex)} min |")


def medians(seeds: range) -> None:
    for kind_id, kind in exercises.KINDS.items():
        for level in kind.LEVELS:
            counted = [engine.minutes(exercises.generate(kind_id, seed, level)) for seed in seeds]
            print(f"{kind_id:18s} level {level}: median {statistics.median(counted):4.1f}, largest {max(counted):4.1f} "
                  f"(at most {budget.BUDGET_MINUTES[level]:g})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--medians", action="store_true", help="every kind and level instead of the heavy problems")
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0 … N−1")
    args = parser.parse_args()
    if args.medians:
        medians(range(args.seeds))
    else:
        problems(range(args.seeds))
        print()
        reviewed()
