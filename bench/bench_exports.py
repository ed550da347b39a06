"""A class's printed sheets, bounded: per-student worksheet and answer key PDFs written one
student at a time into a ZIP on disk, as services.exports does off the page's script run.

    python bench/bench_exports.py [--students 200] [--items mix|attention3]
    python bench/bench_exports.py --cli [--students 200]    # the command line's class PDFs

Reports wall time, CPU time (this process and its compiler children), the process's peak resident
memory, the largest compiler child's (ru_maxrss of the children: Typst runs in `worksheets.files.compilers()`
child processes at once, each replaced before it passes `CHILD_MEMORY`), the bound of the two together
(process + children × largest child), the peak of all of them at once as sampled from /proc every
20 ms, and the Python heap's peak (tracemalloc). Goal for 200 students ×
20 items, worksheet and key: ≤ 500 MB peak, ≤ 60 s on the 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deploy.cluster import rss_mb as _rss_mib  # noqa: E402  (VmRSS in MiB, 0 when gone)
from exercises import worksheets  # noqa: E402
from exercises.teacher.assignments import make_spec  # noqa: E402
from exercises.worksheets import files  # noqa: E402

MIX = [  # 20 exercises: the forward pass step by step, whole passes, backward steps (bench_worksheets ×2)
    {"kind": "projection", "level": 2, "count": 2}, {"kind": "scores", "level": 2, "count": 4},
    {"kind": "scaling", "level": 2, "count": 2}, {"kind": "masking", "level": 2, "count": 2},
    {"kind": "softmax", "level": 2, "count": 4}, {"kind": "weighted_sum", "level": 2, "count": 2},
    {"kind": "attention", "level": 1, "count": 2}, {"kind": "grad_weighted_sum", "level": 1, "count": 2},
]
ATTENTION3 = [{"kind": "attention", "level": 3, "count": 20}, {"kind": "attention", "level": 3, "count": 20}]


def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (children, their children …)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            out += [child, *_children(child)]
    return out


class Sampler(threading.Thread):
    """The resident memory of this process and its children together, every 20 ms (Linux /proc):
    the peak the machine actually held at once."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, _rss_mib(me) + sum(_rss_mib(c) for c in _children(me)))


def cli(students: int) -> int:
    """`python -m exercises worksheet --kinds attention,backprop,softmax,scores --level 2 --count 5
    --students NAMES --format pdf` (20 items a student), its process tree's memory sampled from /proc."""
    import subprocess

    with tempfile.TemporaryDirectory() as folder:
        names = Path(folder) / "names.txt"
        names.write_text("\n".join(f"Student {i:03d}" for i in range(students)) + "\n", encoding="utf-8")
        sampler = Sampler()  # samples this process and its children: the CLI and its compiler children
        sampler.start()
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "exercises", "worksheet", "--kinds", "attention,backprop,softmax,scores",
                        "--level", "2", "--count", "5", "--students", str(names), "--format", "pdf",
                        "--out", str(Path(folder) / "out")], check=True, stdout=subprocess.DEVNULL,
                       cwd=Path(__file__).resolve().parent.parent)
        elapsed = time.perf_counter() - t0
        sampler.stop.set()
        files_written = len(list((Path(folder) / "out").glob("*.pdf")))
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"CLI, {students} students × 20 items: {elapsed:.1f} s (CPU {child.ru_utime + child.ru_stime:.0f} s), "
          f"{files_written} PDFs; largest process {child.ru_maxrss / 1024:.0f} MiB, sampled peak of the whole "
          f"tree at once {sampler.peak:.0f} MiB")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--items", choices=("mix", "attention3"), default="mix")
    parser.add_argument("--no-tracemalloc", action="store_true", help="time without tracemalloc's overhead")
    parser.add_argument("--cli", action="store_true", help="the command line's class PDFs instead")
    args = parser.parse_args()
    if args.cli:
        return cli(args.students)
    items = MIX if args.items == "mix" else ATTENTION3
    names = [f"Student {i:03d}" for i in range(args.students)]
    if not args.no_tracemalloc:
        tracemalloc.start()
    sampler = Sampler()
    sampler.start()
    t0 = time.perf_counter()
    spec = make_spec("Benchmark class", items, seed=2024, per_student=True)
    ws = worksheets.build(spec, names, code="BENCH234")
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        path = worksheets.write_pdf_zip(ws, Path(folder) / "sheets.zip")
        size = path.stat().st_size
    t2 = time.perf_counter()
    sampler.stop.set()
    heap = tracemalloc.get_traced_memory()[1] / 2**20 if not args.no_tracemalloc else float("nan")
    usage, child = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    rss, child_rss = usage.ru_maxrss / 1024, child.ru_maxrss / 1024
    cpu = usage.ru_utime + usage.ru_stime + child.ru_utime + child.ru_stime
    count = sum(i["count"] for i in items)
    print(f"{args.students} students × {count} items ({args.items}): generate {t1 - t0:.1f} s, PDFs {t2 - t1:.1f} s, "
          f"total {t2 - t0:.1f} s (CPU {cpu:.0f} s, load average {os.getloadavg()[0]:.1f}); "
          f"ZIP {size / 2**20:.0f} MiB; peak RSS {rss:.0f} MiB, largest of {files.compilers()} compiler processes "
          f"{child_rss:.0f} MiB (together at most {rss + files.compilers() * child_rss:.0f} MiB, "
          f"sampled peak of all at once {sampler.peak:.0f} MiB); "
          f"Python heap peak {heap:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
