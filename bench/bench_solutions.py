"""Worked solutions: the cold and the warm cost of generate + solve + render, per kind.

    python bench/bench_solutions.py [--seeds 8] [--kinds softmax,attention] [--json]

How it is measured (in one process, time.perf_counter around each call, median over triples):
- cold: a (kind, seed, level) triple never seen by this process: exercises.generate, then
  exercises.solutions.solution(kind, seed, level) (the lru_cache misses), then render = every LaTeX string
  the page can show (each step in exact and decimal form, every cell's derivation, the aids). Seeds are
  spread over every level of the kind. sympy's own caches are warm from the first triple (one warm-up
  triple per kind is solved and not counted), as in a running server;
- warm: the same triple again: the cached exercise, solution(kind, seed, level) (an lru_cache hit), the same
  render (memoised in each Step) — what a rerun of the Practice page costs before st.cache_data.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import exercises  # noqa: E402
from exercises import solutions  # noqa: E402

FIRST_SEED = 10_000  # far from the seeds tests and demos use, so no triple is cached already


def render(kind: str, seed: int, level: int, ex: exercises.Exercise) -> int:
    """Every string the page can show for this exercise; returns how many."""
    steps = solutions.solution(kind, seed, level)
    strings = solutions.all_latex(steps) + exercises.aids(ex).latex_strings()
    return len(strings)


def measure(kind: str, seeds: int) -> dict:
    levels = exercises.KINDS[kind].LEVELS
    triples = [(FIRST_SEED + k, levels[k % len(levels)]) for k in range(seeds)]
    warm_up = exercises.generate(kind, FIRST_SEED - 1, levels[0])
    render(kind, FIRST_SEED - 1, levels[0], warm_up)
    cold, warm, strings, cached = [], [], [], {}
    for seed, level in triples:
        start = time.perf_counter()
        ex = exercises.generate(kind, seed, level)
        strings.append(render(kind, seed, level, ex))
        cold.append((time.perf_counter() - start) * 1000)
        cached[(seed, level)] = ex
    for seed, level in triples:
        start = time.perf_counter()
        render(kind, seed, level, cached[(seed, level)])
        warm.append((time.perf_counter() - start) * 1000)
    return {"kind": kind, "triples": len(triples), "cold_ms": statistics.median(cold), "cold_max_ms": max(cold),
            "warm_ms": statistics.median(warm), "strings": statistics.median(strings)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8, help="triples per kind, spread over its levels")
    parser.add_argument("--kinds", default="", help="comma-separated kind ids (default: all)")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k] or list(exercises.KINDS)
    unknown = [k for k in kinds if k not in exercises.KINDS]
    if unknown:
        parser.error(f"unknown kinds: {', '.join(unknown)}; known: {', '.join(exercises.KINDS)}")
    rows = [measure(kind, args.seeds) for kind in kinds]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"# generate + solve + render to LaTeX, median ms per triple ({args.seeds} triples per kind)")
    print(f"# Python {platform.python_version()}, {platform.machine()}, sympy {__import__('sympy').__version__}")
    print(f"{'kind':<20} {'cold':>8} {'cold max':>9} {'warm':>8} {'strings':>8}")
    for r in rows:
        print(f"{r['kind']:<20} {r['cold_ms']:>8.1f} {r['cold_max_ms']:>9.1f} {r['warm_ms']:>8.3f} "
              f"{r['strings']:>8.0f}")


if __name__ == "__main__":
    main()
