"""The process runs BLAS on one thread once exercises is imported (exercises/__init__.py): its products are
small, and BLAS's worker threads only spun on the other core (40 % of gqa's generate time was theirs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from threadpoolctl import threadpool_info

import exercises

ROOT = Path(__file__).resolve().parent.parent


def test_every_blas_library_is_limited_to_one_thread():
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert blas, "numpy's BLAS is loaded"
    assert all(lib["num_threads"] == exercises.BLAS_THREADS == 1 for lib in blas), blas


# In a fresh process: products big enough for OpenBLAS to share among its threads, then the CPU ticks every
# thread but the main one took meanwhile (Linux's /proc). Without the limit, on two cores or more, they are
# well above 0 (measured: 3-9 ticks for these products); with it, no other thread works at all.
_OTHER_THREADS = """
import os
import numpy as np
import exercises  # the limit

def other_ticks():
    total = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) != os.getpid():
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
    return total

a = np.random.default_rng(0).random((600, 600))
before = other_ticks()
for _ in range(8):
    a = (a @ a) / 600.0
print(other_ticks() - before)
"""


def test_no_other_thread_works_on_a_big_product():
    out = subprocess.run([sys.executable, "-c", _OTHER_THREADS], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "0", out.stdout
