"""A class marked from paper: the app's paper sheets for N students, filled in (print and handwriting-like
strokes in turn), photographed in simulation, then read by services.paper's reading children and marked.

    python bench/bench_paper.py [--students 30] [--workers 2] [--seed 1]

Only the reading and marking are timed (making the photos is the corpus's work, not the app's). Reports
pages and cells, cells read right per style, cells sent to review, grades that differ from what was
written without review (must be 0), wall and CPU time, the peak resident memory of this process and
its children together (sampled from /proc) and the load average. Goal: 30 students × 4 pages ≤ 2 min on
the 2-core machine, memory bounded by the children's cap (services.paper.CHILD_MEMORY each).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# four pages a student: a sheet of these items with no working space
ITEMS = [{"kind": "softmax", "level": 2}, {"kind": "masking", "level": 2}, {"kind": "weighted_sum", "level": 2},
         {"kind": "concepts", "level": 1}]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="bench-paper-")
    os.environ.pop("DATABASE_URL", None)
    os.environ["ATTENTION_DB_PATH"] = str(Path(folder) / "bench.sqlite3")
    os.environ.setdefault("ATTENTION_SECRET", "bench paper")

    import numpy as np
    from bench_exports import Sampler

    from services import assignments
    from services import paper as marking_service
    from tests import paper_corpus

    names = [f"Student {i + 1:02d}" for i in range(args.students)]
    created = assignments.create("Paper bench", ITEMS, seed=args.seed, per_student=True)
    a = created.assignment
    assignments.set_roster(a, created.teacher_key, "\n".join(names))
    t0 = time.perf_counter()
    files, truth = paper_corpus.class_corpus(assignments.paper_worksheet(a, names), np.random.default_rng(args.seed))
    print(f"corpus: {len(files)} photos of {len(names)} students made in {time.perf_counter() - t0:.0f} s "
          f"({sum(len(d) for _n, d in files) / 2**20:.0f} MiB of JPEG)")

    load_before = os.getloadavg()
    sampler = Sampler()
    sampler.start()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    pages = marking_service.read_uploads(a, files, workers=args.workers)
    marking = marking_service.mark(a, pages)
    wall = time.perf_counter() - t0
    sampler.stop.set()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    children_cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)

    figures = paper_corpus.figures(marking, truth, len(files))
    cells = sum(figures.cells.values())
    print(f"read and marked {len(pages)} pages ({cells} cells) in {wall:.1f} s wall, {children_cpu:.0f} s CPU in "
          f"the {args.workers} reading processes; peak memory of the whole tree {sampler.peak:.0f} MiB "
          f"(largest child {cpu1.ru_maxrss / 1024:.0f} MiB); load average before {load_before[0]:.1f}, "
          f"after {os.getloadavg()[0]:.1f}")
    for style in paper_corpus.STYLES:
        print(f"  {style}: {figures.read_right[style]} of {figures.cells[style]} cells read right "
              f"({100 * figures.share(style):.2f} %)")
    print(f"  sent to review: {figures.review} cells ({100 * figures.review / max(cells, 1):.1f} %); pages not "
          f"read: {len(figures.problems)}; grades differing from what was written without review: "
          f"{len(figures.wrong_unreviewed)}")
    for line in figures.wrong_unreviewed + figures.misreads[:20]:
        print("   ", line)
    return 0 if not figures.wrong_unreviewed else 1


if __name__ == "__main__":
    raise SystemExit(main())
