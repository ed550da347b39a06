"""Side by side in one run: our attention forward-pass exercise against QuizGenerator's.

    python bench/bench_peer.py [--rounds 20] [--batch 25] [--level 2] [--clock cpu] [--runs 3]

The peer is QuizGenerator 0.31.2 (PyPI), whose question `cst463.attention.forward-pass` builds a
self-attention problem (Q, K, V given; weights and output asked) with its explanation. It needs
Python ≥ 3.12, so it runs in its own virtual environment (bench/.peer-venv, made on first use with
the newest `python3.1x` found, and QuizGenerator installed into it from PyPI) as a worker process
that this script drives over a pipe. Both sides are timed in alternating batches within the same
minute, so a loaded machine slows both alike; the figure to read is the ratio of the medians. That ratio
still moves by about ±10 % from one run to the next, so --runs N repeats the table on fresh seeds (the
same two processes) and ends with the range.

What is timed per item (time.perf_counter, or with --clock cpu time.process_time: each process's own CPU
time, which a loaded machine inflates less; inside each process, imports and start-up excluded):
- ours: exercises.generate("attention", seed, level) + exercises.solve(ex) on a fresh seed (the
  worked solution's steps, what Practice shows), and the same with the LaTeX of every step rendered;
- peer: AttentionForwardPass(...).instantiate(rng_seed=seed), which builds body, answers and
  explanation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import exercises  # noqa: E402

PEER = "QuizGenerator==0.31.2"
PEER_VENV = ROOT / "bench" / ".peer-venv"
PEER_WORKER = r"""
import json, sys, time
clock = time.process_time if sys.argv[1:] == ["cpu"] else time.perf_counter
from QuizGenerator.generation.premade_questions.cst463.models.attention import AttentionForwardPass
question = AttentionForwardPass(name="attention", points_value=1)
question.instantiate(rng_seed=0)  # warm, like ours
for line in sys.stdin:
    start, count = (int(x) for x in line.split())
    times = []
    for seed in range(start, start + count):
        t0 = clock()
        question.instantiate(rng_seed=seed)
        times.append(clock() - t0)
    print(json.dumps(times), flush=True)
"""


def peer_python() -> Path:
    """The peer's interpreter, its virtual environment made on first use."""
    python = PEER_VENV / "bin" / "python"
    if python.exists():
        return python
    base = next((shutil.which(f"python3.{minor}") for minor in (14, 13, 12) if shutil.which(f"python3.{minor}")), None)
    if base is None:
        sys.exit("QuizGenerator needs Python ≥ 3.12 and no python3.12/3.13/3.14 is on PATH")
    subprocess.run([base, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", PEER], check=True)
    return python


def ours(start: int, count: int, level: int, render: bool) -> list[float]:
    times = []
    for seed in range(start, start + count):
        t0 = clock()
        ex = exercises.generate("attention", seed, level)
        steps = exercises.solve(ex)
        if render:
            for step in steps:
                step.display(exact=True)
        times.append(clock() - t0)
    return times


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter  # set from --clock in main()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--level", type=int, default=2, choices=exercises.KINDS["attention"].LEVELS)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: time.perf_counter; cpu: time.process_time (each process's CPU time)")
    parser.add_argument("--runs", type=int, default=1,
                        help="the whole table this many times on fresh seeds, then the range of the ratios")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]

    worker = subprocess.Popen([str(peer_python()), "-c", PEER_WORKER, args.clock], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    ours(10**6, 3, args.level, render=True)  # warm imports and sympy's caches, like a running server
    ratios = []
    try:
        for run in range(args.runs):
            ratios.append(one_run(worker, args, offset=run * args.rounds * args.batch))
    finally:
        worker.stdin.close()
        worker.wait(timeout=30)
    if args.runs > 1:
        print(f"over {args.runs} runs, generate + solve against QuizGenerator: {min(ratios):.2f}-{max(ratios):.2f}x "
              f"(each run's ratio of medians: {', '.join(f'{r:.2f}' for r in ratios)})")


def one_run(worker: subprocess.Popen, args: argparse.Namespace, offset: int) -> float:
    """One table: args.rounds alternating rounds on fresh seeds (from 1000 + offset); returns ours / peer."""
    samples: dict[str, list[float]] = {"ours: generate + solve": [], "ours: + LaTeX of every step": [],
                                       "QuizGenerator: instantiate": []}
    for r in range(args.rounds):
        start = 1000 + offset + r * args.batch
        samples["ours: generate + solve"] += ours(start, args.batch, args.level, render=False)
        samples["ours: + LaTeX of every step"] += ours(start + 500_000, args.batch, args.level, render=True)
        worker.stdin.write(f"{start} {args.batch}\n")
        worker.stdin.flush()
        samples["QuizGenerator: instantiate"] += json.loads(worker.stdout.readline())

    peer = statistics.median(samples["QuizGenerator: instantiate"])
    print(f"attention level {args.level}, {args.rounds} alternating rounds of {args.batch} items each side, "
          f"{clock.__name__}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'what':32} {'median ms':>10} {'p95 ms':>8} {'× peer':>7}")
    for name, values in samples.items():
        ordered = sorted(values)
        median = statistics.median(ordered)
        p95 = ordered[int(round(0.95 * (len(ordered) - 1)))]
        print(f"{name:32} {median * 1e3:10.2f} {p95 * 1e3:8.2f} {median / peer:7.2f}")
    return statistics.median(samples["ours: generate + solve"]) / peer


if __name__ == "__main__":
    main()
