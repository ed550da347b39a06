"""Worksheet and answer-key PDFs for a class: 30 students × 10 items, per-student variants (goal ≤ 10 s).

    python bench/bench_worksheets.py [--students 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exercises import worksheets  # noqa: E402
from exercises.teacher.assignments import make_spec  # noqa: E402

ITEMS = [  # 10 exercises: the forward pass step by step, one whole pass, two backward steps
    {"kind": "projection", "level": 2, "count": 1}, {"kind": "scores", "level": 2, "count": 2},
    {"kind": "scaling", "level": 2, "count": 1}, {"kind": "masking", "level": 2, "count": 1},
    {"kind": "softmax", "level": 2, "count": 2}, {"kind": "weighted_sum", "level": 2, "count": 1},
    {"kind": "attention", "level": 1, "count": 1}, {"kind": "grad_weighted_sum", "level": 1, "count": 1},
]


def run_once(students: list[str]) -> dict[str, float]:
    spec = make_spec("Benchmark class", ITEMS, seed=2024, per_student=True)
    t0 = time.perf_counter()
    ws = worksheets.build(spec, students, code="BENCH234")
    t1 = time.perf_counter()
    sheet = worksheets.to_pdf(ws)
    t2 = time.perf_counter()
    key = worksheets.to_pdf(ws, key=True)
    t3 = time.perf_counter()
    assert sheet.startswith(b"%PDF") and key.startswith(b"%PDF")
    return {"generate": t1 - t0, "worksheet": t2 - t1, "key": t3 - t2, "total": t3 - t0,
            "sheet_kb": len(sheet) / 1024, "key_kb": len(key) / 1024}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    students = [f"Student {i:02d}" for i in range(args.students)]
    runs = [run_once(students) for _ in range(args.repeat)]  # each run starts from fresh exercises
    for name in ("generate", "worksheet", "key", "total"):
        values = [r[name] for r in runs]
        print(f"{name:<10} median {statistics.median(values):6.2f} s   (runs: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"sizes      worksheet {runs[-1]['sheet_kb']:.0f} KiB, answer key {runs[-1]['key_kb']:.0f} KiB; "
          f"{args.students} students × {sum(i['count'] for i in ITEMS)} items")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
