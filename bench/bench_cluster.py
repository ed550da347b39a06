"""A class at once through nginx: bench_class.py's students against 1, 2 and 4 replicas, side by side.

    python bench/bench_cluster.py [--replicas 1,2,4] [--n 30] [--seconds 30] [--period 2]

How it is measured:
- One throwaway PostgreSQL for the whole run (scripts/start_test_postgres.sh); for each replica count, a
  fresh deploy/cluster.py cluster on loopback: R `streamlit run app.py` replicas with the production flags
  (deploy/streamlit-production.toml) on that database, nginx in front (deploy/nginx.conf).
- Each replica is warmed directly (one visit of the root page, one Practice student), as in bench_class.py.
- Then N students of bench_class.py (a real Streamlit session each over the websocket, a Check every
  `--period` seconds for `--seconds`), all through nginx. A student's websocket carries no route cookie, so
  nginx routes it by a fresh $request_id: the same spread over the replicas as N browsers with their own
  cookies. Every attempt is written to PostgreSQL, as in a real deployment.
- Latency of a check: send rerun → its script_finished, at the client (so nginx's hop is included).
- Errors: as bench_class.py (timeout 10 s, a failed run, an exception element, no feedback, a dropped
  connection).
- Memory: VmRSS of every replica from /proc every 0.5 s; the peak of their sum, the largest single replica.
- Sessions per replica: nginx's access log (upstream of each websocket), after the class.
Bounded: N ≤ 200 sessions, `--seconds` per replica count, loopback only; everything is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_class as bc  # noqa: E402

from deploy import cluster as deploy  # noqa: E402
from tests.ws_client import open_root  # noqa: E402


async def sample_rss(cluster: deploy.Cluster, samples: list[list[float]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(cluster.rss_mb())
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass


async def one_class(cluster: deploy.Cluster, n: int, seconds: float, period: float) -> tuple[bc.Tally, list]:
    for index, replica_url in enumerate(cluster.replica_urls):  # warm each replica, untimed
        await open_root(replica_url)
        await bc.student(replica_url, 10_000 + index, time.perf_counter(), period, bc.Tally(), random.Random(0))
    tally, samples, stop = bc.Tally(), [cluster.rss_mb()], asyncio.Event()
    sampler = asyncio.create_task(sample_rss(cluster, samples, stop))
    rng = random.Random(n)
    until = time.perf_counter() + seconds
    await asyncio.gather(*(bc.student(cluster.url, i, until, period, tally, rng) for i in range(n)))
    stop.set()
    await sampler
    samples.append(cluster.rss_mb())
    return tally, samples


def sessions_per_replica(cluster: deploy.Cluster) -> list[int]:
    counts = Counter(cluster.replica_of(line.get("upstream", "")) for line in cluster.access_log()
                     if line.get("uri") == "/_stcore/stream" and line.get("status") == "101")
    return [counts.get(i, 0) for i in range(cluster.replicas)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,2,4", help="replica counts, comma-separated")
    parser.add_argument("--n", type=int, default=30, help="students (sessions) per class")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each class run")
    parser.add_argument("--period", type=float, default=2.0, help="seconds between a student's checks")
    args = parser.parse_args()
    counts = [int(x) for x in args.replicas.split(",") if x]
    if args.n > 200 or max(counts) > 8:
        parser.error("at most 200 sessions and 8 replicas")
    if deploy.nginx_binary() is None:
        parser.error("needs Debian's nginx (apt-get install nginx)")

    print(f"# bench_cluster — {bc.machine()}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}: N={args.n} websocket sessions through nginx, a Check every "
          f"{args.period:g} s each for {args.seconds:g} s; replicas on one PostgreSQL; latency = send rerun → "
          f"script_finished; load average {os.getloadavg()[0]:.1f}")
    print(f"{'replicas':>8} {'checks':>7} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'load p50':>9} {'load p95':>9} "
          f"{'errors':>7} {'RSS sum peak MB':>16} {'RSS max/replica':>16}  sessions per replica")
    port = deploy.free_port()
    database_url = deploy.start_throwaway_postgres(port)
    try:
        for replicas in counts:
            with deploy.Cluster(replicas=replicas, database_url=database_url) as cluster:
                tally, samples = asyncio.run(one_class(cluster, args.n, args.seconds, args.period))
                spread = sessions_per_replica(cluster)
            errors = sum(tally.errors.values())
            checks = tally.checks
            print(f"{replicas:>8} {len(checks):>7} {statistics.median(checks) if checks else float('nan'):7.0f} "
                  f"{bc.pct(checks, 0.95):7.0f} {max(checks, default=float('nan')):7.0f} "
                  f"{bc.pct(tally.loads, 0.5):9.0f} {bc.pct(tally.loads, 0.95):9.0f} {errors:>7} "
                  f"{max(sum(s) for s in samples):16.0f} {max(max(s) for s in samples):16.0f}  "
                  f"{'/'.join(str(c) for c in spread)}" + (f"  errors: {tally.errors}" if errors else ""),
                  flush=True)
    finally:
        deploy.stop_throwaway_postgres(port)
    print(f"# load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
