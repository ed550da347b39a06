"""Engine cost, in process: generate + grade per kind, and solve + render cold and warm.

    python bench/bench_engine.py [--seeds 200] [--solve-seeds 30] [--kinds softmax,scores] [--clock cpu]

What is timed (time.perf_counter, one call at a time, median and p95 over seeds; with --clock cpu,
time.process_time: the CPU time of this process only, which a machine shared with other jobs inflates far
less than the wall clock, since time spent waiting for a core is not counted):
- generate: exercises.generate(kind, seed, level) for fresh seeds (nothing cached: each triple is new);
- grade: exercises.grade(ex, the right answer typed as text) — the parse of every cell included;
- generate+grade: the sum per seed, per kind and level (DESIGN §2: median ≤ 10 ms, p95 ≤ 30 ms);
- solve+render cold: solve(ex) on a fresh exercise plus the LaTeX the page shows (each step's display,
  exact and decimal, and the aids) — the first time that exercise is solved in the process (sympy's own
  caches are warm from earlier seeds, as in a running server). Goal ≤ 150 ms;
- solve+render warm: the same calls again on the same exercise (memoised per exercise);
- first solve in a new process: one subprocess per kind timing its first solve (imports excluded).
Levels: every level of the kind, seeds spread evenly over them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import exercises  # noqa: E402
from exercises.cli import selftest  # noqa: E402

GOAL_GENERATE_GRADE_MS = 10.0  # median, per kind and level
GOAL_GENERATE_GRADE_P95_MS = 30.0
GOAL_SOLVE_COLD_MS = 150.0
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter  # set from --clock in main()


def ms(seconds: float) -> float:
    return seconds * 1000.0


def summary(samples: list[float]) -> tuple[float, float, float]:
    """(median, p95, max) of millisecond samples."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95, ordered[-1]


def triples(kind: str, count: int, offset: int = 0) -> list[tuple[int, int]]:
    """(seed, level) pairs: fresh seeds spread over the kind's levels."""
    levels = list(exercises.KINDS[kind].LEVELS)
    return [(offset + i, levels[i % len(levels)]) for i in range(count)]


def bench_generate_grade(kind: str, seeds: int, level: int) -> dict[str, tuple[float, float, float]]:
    gen, grd, both = [], [], []
    for seed in range(10_000, 10_000 + seeds):
        t0 = clock()
        ex = exercises.generate(kind, seed, level)
        t1 = clock()
        answer = selftest.correct_answer(ex)
        t2 = clock()
        fb = exercises.grade(ex, answer)
        t3 = clock()
        assert fb.correct, (kind, seed, level)
        gen.append(ms(t1 - t0))
        grd.append(ms(t3 - t2))
        both.append(ms((t1 - t0) + (t3 - t2)))
    return {"generate": summary(gen), "grade": summary(grd), "generate+grade": summary(both)}


def render(steps: list, ex: exercises.Exercise) -> int:
    """Build the LaTeX the solution panel shows; returns the characters made (so nothing is skipped)."""
    made = 0
    for step in steps:
        made += len(step.latex) + len(step.display(True)) + len(step.display(False))
    aids = exercises.aids(ex) if hasattr(exercises, "aids") else None
    if aids is not None:
        made += sum(len(s) for s in aids.latex_strings())
    return made


def bench_solve(kind: str, seeds: int) -> dict[str, tuple[float, float, float]]:
    cold, warm, cells = [], [], []
    pairs = triples(kind, seeds + 3, offset=20_000)
    for seed, level in pairs[:3]:  # warm the code paths (imports, sympy) once, untimed
        ex = exercises.generate(kind, seed, level)
        render(exercises.solve(ex), ex)
    for seed, level in pairs[3:]:
        ex = exercises.generate(kind, seed, level)
        t0 = clock()
        steps = exercises.solve(ex)
        render(steps, ex)
        t1 = clock()
        steps = exercises.solve(ex)
        render(steps, ex)
        t2 = clock()
        for step in steps:  # every cell's own derivation, as "open any cell" would
            for i in range(step.shape[0]):
                for j in range(step.shape[1]):
                    step.cell(i, j)
        t3 = clock()
        cold.append(ms(t1 - t0))
        warm.append(ms(t2 - t1))
        cells.append(ms(t3 - t2))
    return {"solve+render cold": summary(cold), "solve+render warm": summary(warm),
            "all cell derivations": summary(cells)}


FIRST_SOLVE = """
import sys, time, json
sys.path.insert(0, {root!r})
import exercises
kind = {kind!r}
level = exercises.KINDS[kind].LEVELS[-1]
ex = exercises.generate(kind, 7, level)
t0 = time.perf_counter()
steps = exercises.solve(ex)
for s in steps:
    s.display(True); s.display(False)
print(json.dumps((time.perf_counter() - t0) * 1000))
"""


def first_solve_in_new_process(kind: str) -> float:
    out = subprocess.run([sys.executable, "-c", FIRST_SOLVE.format(root=str(ROOT), kind=kind)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def machine() -> str:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), "
            f"Python {platform.python_version()}, numpy {__import__('numpy').__version__}, "
            f"sympy {__import__('sympy').__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="seeds per kind for generate + grade")
    parser.add_argument("--solve-seeds", type=int, default=30, help="seeds per kind for solve + render (0: none)")
    parser.add_argument("--kinds", default="", help="comma-separated kind ids (default: all)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: time.perf_counter; cpu: time.process_time (this process's CPU time)")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    kinds = [k for k in args.kinds.split(",") if k] or list(exercises.KINDS)
    has_solve = hasattr(exercises, "solve")

    print(f"# bench_engine — {machine()}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {args.seeds} seeds/kind for generate+grade, "
          f"{args.solve_seeds} for solve; times in ms (median / p95 / max), {clock.__name__} in process; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'kind, level':<24} {'generate':>18} {'grade':>18} {'gen+grade':>18}  "
          f"goal median≤{GOAL_GENERATE_GRADE_MS:g}, p95≤{GOAL_GENERATE_GRADE_P95_MS:g}")
    figures: dict[str, dict] = {}
    worst, worst_p95, over = 0.0, 0.0, 0
    for kind in kinds:
        for level in exercises.KINDS[kind].LEVELS:
            r = bench_generate_grade(kind, args.seeds, level)
            figures[f"{kind}/{level}"] = {k: dict(zip(("median", "p95", "max"), v)) for k, v in r.items()}
            median, p95 = r["generate+grade"][:2]
            worst, worst_p95 = max(worst, median), max(worst_p95, p95)
            cols = " ".join(f"{v[0]:6.2f}/{v[1]:5.2f}/{v[2]:5.1f}" for v in r.values())
            ok = median <= GOAL_GENERATE_GRADE_MS and p95 <= GOAL_GENERATE_GRADE_P95_MS
            over += not ok
            print(f"{kind + ' ' + str(level):<24} {cols}  {'ok' if ok else 'OVER'}")
    print(f"worst median generate+grade: {worst:.2f} ms, worst p95 {worst_p95:.2f} ms; "
          f"{over} kind-levels over the bound")

    if not has_solve:
        print("\nexercises.solve does not exist yet: solve + render not measured")
    elif args.solve_seeds <= 0:
        print("\n--solve-seeds 0: solve + render not measured")
    else:
        print(f"\n{'kind':<20} {'solve+render cold':>20} {'warm':>20} {'all cells':>20} "
              f"{'1st in process':>15}  goal cold≤{GOAL_SOLVE_COLD_MS:g}")
        worst_cold = 0.0
        for kind in kinds:
            r = bench_solve(kind, args.solve_seeds)
            first = first_solve_in_new_process(kind)
            figures.setdefault(kind, {}).update({k: dict(zip(("median", "p95", "max"), v)) for k, v in r.items()})
            figures.setdefault(kind, {})["first solve in a new process"] = first
            worst_cold = max(worst_cold, r["solve+render cold"][0])
            cols = " ".join(f"{v[0]:7.2f}/{v[1]:6.1f}/{v[2]:5.0f}" for v in r.values())
            flag = "ok" if r["solve+render cold"][0] <= GOAL_SOLVE_COLD_MS else "OVER"
            print(f"{kind:<20} {cols} {first:15.0f}  {flag}")
        print(f"worst median solve+render cold: {worst_cold:.1f} ms (goal ≤ {GOAL_SOLVE_COLD_MS:g} ms)")
    if args.json:
        print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
