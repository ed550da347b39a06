"""Generate + grade per kind, two trees side by side in one run: before (another checkout) and after (this one).

    python bench/compare_engine.py --before /path/to/other/checkout [--seeds 120] [--rounds 12] [--kinds a,b]
                                   [--runs 3]

A figure from one run and a figure from another, minutes apart, differ by 30-50 % on a shared machine
whatever the code does. Here each tree runs in a worker process of its own (its own imports, its own
tables, warmed on one exercise per kind), and the two take turns: every kind's seeds are split into
`rounds` chunks, and each chunk is timed by one worker and then the other, who goes first alternating. So
both see the same load, and the ratio after / before is the figure to read. The machine's speed also
changes by about 1.5× over minutes, so --runs repeats the whole table and ends with each kind's range
over the runs and how many of them met the goal.

What is timed per exercise is what bench/bench_engine.py times (CPU clock, time.process_time):
exercises.generate(kind, seed, level) plus exercises.grade(ex, the right answer typed as text), on seeds
10 000 + i with the kind's levels taken in turn (run r of --runs: i from r · seeds on). A kind only one
tree has is shown for that tree alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_MEDIAN_MS, GOAL_P95_MS = 2.0, 5.0

WORKER = r"""
import json, sys, time
import exercises
try:
    from exercises.cli import selftest
except ImportError:  # a checkout from before the package's cli/ folder
    from exercises import selftest

clock = time.process_time
print(json.dumps(list(exercises.KINDS)), flush=True)
for line in sys.stdin:
    kind, start, count = line.split()
    levels = list(exercises.KINDS[kind].LEVELS)
    if start == "warm":
        ex = exercises.generate(kind, 1, levels[0])
        exercises.grade(ex, selftest.correct_answer(ex))
        print("[]", flush=True)
        continue
    times = []
    for i in range(int(start), int(start) + int(count)):
        t0 = clock()
        ex = exercises.generate(kind, 10_000 + i, levels[i % len(levels)])
        t1 = clock()
        answer = selftest.correct_answer(ex)
        t2 = clock()
        if not exercises.grade(ex, answer).correct:
            raise SystemExit(f"{kind} seed {10_000 + i}: the right answer graded wrong")
        times.append((t1 - t0) + (clock() - t2))
    print(json.dumps(times), flush=True)
"""


class Worker:
    """One tree's python process, timing chunks of seeds on request."""

    def __init__(self, tree: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER], cwd=tree, text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(tree)})
        self.kinds = json.loads(self.proc.stdout.readline())

    def ask(self, kind: str, start: str, count: int) -> list[float]:
        self.proc.stdin.write(f"{kind} {start} {count}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the worker stopped at {kind} (exit {self.proc.wait()})")
        return [t * 1000.0 for t in json.loads(line)]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def summary(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout (its root folder)")
    parser.add_argument("--seeds", type=int, default=120, help="seeds per kind")
    parser.add_argument("--rounds", type=int, default=12, help="chunks per kind, each timed by both in turn")
    parser.add_argument("--kinds", default="", help="comma-separated kind ids (default: every kind of either)")
    parser.add_argument("--runs", type=int, default=1, help="the whole table this many times, then each kind's range")
    args = parser.parse_args()
    before, after = Worker(args.before.resolve()), Worker(ROOT)
    kinds = [k for k in args.kinds.split(",") if k] or list(dict.fromkeys(after.kinds + before.kinds))
    runs = [table(args, before, after, kinds, run * args.seeds) for run in range(max(1, args.runs))]
    if len(runs) > 1:
        print(f"# over {len(runs)} runs: after's median and p95 (lowest – highest), after / before, runs within both")
        for kind in kinds:
            got = [run[kind] for run in runs if kind in run]
            if not got:
                continue
            med, p95, ratio = ([g[i] for g in got] for i in range(3))
            ratios = f"{min(ratio):.2f}–{max(ratio):.2f}×" if None not in ratio else "—"
            print(f"{kind:<20} {min(med):5.2f}–{max(med):5.2f} / {min(p95):5.2f}–{max(p95):5.2f}  {ratios:>12}  "
                  f"{sum(g[3] for g in got)} of {len(got)}")
    before.close()
    after.close()


def table(args, before: Worker, after: Worker, kinds: list[str], offset: int) -> dict[str, tuple]:
    """One side-by-side table over seeds 10 000 + offset + i (each run its own seeds: a table a worker made
    for an earlier run's exercise is not met again); {kind: (after's median, p95, after / before or None,
    within both)}."""
    print(f"# compare_engine: before {args.before.resolve()}, after {ROOT}; {args.seeds} seeds per kind in "
          f"{args.rounds} alternating rounds; CPU clock; load average {os.getloadavg()[0]:.1f}")
    print(f"{'kind':<20} {'before med / p95':>18} {'after med / p95':>18} {'after/before':>13}  "
          f"goal ≤{GOAL_MEDIAN_MS:g} / ≤{GOAL_P95_MS:g}")
    met = 0
    found = {}
    for kind in kinds:
        sides = [w for w in (before, after) if kind in w.kinds]
        for w in sides:
            w.ask(kind, "warm", 0)
        times: dict[Worker, list[float]] = {w: [] for w in sides}
        chunk = -(-args.seeds // args.rounds)
        for r, start in enumerate(range(0, args.seeds, chunk)):
            for w in (sides if r % 2 == 0 else sides[::-1]):
                times[w] += w.ask(kind, str(offset + start), min(chunk, args.seeds - start))
        cols = {w: summary(t) for w, t in times.items()}
        shown = [f"{cols[w][0]:7.2f} / {cols[w][1]:6.2f}" if w in cols else f"{'—':>16}" for w in (before, after)]
        ratio = f"{cols[after][0] / cols[before][0]:12.2f}×" if len(cols) == 2 else f"{'':>13}"
        ok = after in cols and cols[after][0] <= GOAL_MEDIAN_MS and cols[after][1] <= GOAL_P95_MS
        met += ok
        if after in cols:
            found[kind] = (*cols[after], cols[after][0] / cols[before][0] if len(cols) == 2 else None, ok)
        print(f"{kind:<20} {shown[0]:>18} {shown[1]:>18} {ratio}  {'met' if ok else 'NOT MET'}")
    print(f"after: {met} of {len(kinds)} kinds within both bounds; load average {os.getloadavg()[0]:.1f}")
    return found


if __name__ == "__main__":
    main()
