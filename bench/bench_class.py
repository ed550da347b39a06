"""A class at once: N students on the Practice page, each checking an answer every 2 s.

    python bench/bench_class.py [--n 10,30,60] [--seconds 30] [--period 2]

How it is measured:
- For each N, a fresh `streamlit run app.py` on 127.0.0.1 (its own temporary SQLite file), warmed by one
  session, then N concurrent sessions, each a real Streamlit session over the websocket
  /_stcore/stream: the client speaks the same protobuf protocol as the browser (BackMsg rerun_script
  with the widget states the browser would send; ForwardMsg deltas back), so the server does exactly
  the work it does for a browser. The client is asyncio + `websockets` (a Streamlit dependency).
- Each student opens /practice?kind=…&level=…&seed=… (kinds mixed over the forward steps), then types
  an answer into the cells (right, or with one wrong cell, alternately) and presses Check every
  `--period` seconds, starting at a random phase; the next check waits for the previous one.
- Latency of a check: from sending the rerun to receiving its `script_finished` (the server's whole
  script run plus the transfer of its deltas over loopback), time.perf_counter in the client.
- Errors: a check that times out (10 s), a run that does not finish successfully, an exception
  element in the page, a check without a feedback alert, a dropped connection.
- Server memory: VmRSS of the server process from /proc, sampled every 0.5 s; peak and end of the run.
Bounded: at most max(N) sessions, `--seconds` per N, loopback only; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import websockets  # noqa: E402

import exercises  # noqa: E402
from tests import streamlit_server as server  # noqa: E402
from tests.streamlit_server import free_port, stop_server  # noqa: E402
from tests.ws_client import Session, answer_texts, open_root, page_problems  # noqa: E402

KINDS = ["softmax", "scores", "masking", "weighted_sum", "scaling", "projection"]
CHECK_TIMEOUT_S = 10.0
GOAL_P95_MS, GOAL_RSS_MB = 500.0, 600.0


# ---------------------------------------------------------------- the server


def start_server(folder: Path, script: str = "app.py", flags: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """`streamlit run <script>` on a free loopback port, its own SQLite file in `folder`; (process, URL)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(ATTENTION_DB_PATH=str(folder / "bench.sqlite3"), PYTHONPATH=str(ROOT))
    log = folder / "streamlit.log"
    process = server.start_server(port, log, env, script=script, flags=flags)
    url = f"http://127.0.0.1:{port}"
    server.wait_healthy(url, process, log)
    return process, url


def rss_mb(pid: int) -> float:
    """Resident memory of one process, from /proc/<pid>/status (VmRSS, kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---------------------------------------------------------------- one student


@dataclass
class Tally:
    checks: list[float] = field(default_factory=list)  # ms
    loads: list[float] = field(default_factory=list)  # ms, connect + first run
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


async def student(url: str, index: int, until: float, period: float, tally: Tally, rng: random.Random) -> None:
    kind = KINDS[index % len(KINDS)]
    levels = list(exercises.KINDS[kind].LEVELS)
    seed, level = 1000 + index, levels[index % len(levels)]
    ex = exercises.generate(kind, seed, level)
    session = Session(url, f"kind={kind}&level={level}&seed={seed}")
    try:
        t0 = time.perf_counter()
        await session.connect()
        ok, messages = await asyncio.wait_for(session.run(), CHECK_TIMEOUT_S * 3)
        tally.loads.append((time.perf_counter() - t0) * 1000)
        if not ok or page_problems(messages)[0] or "submit" not in session.buttons:
            tally.error("first load failed")
            return
        await asyncio.sleep(rng.uniform(0, period))  # students do not click in lockstep
        count = 0
        while time.perf_counter() < until:
            started = time.perf_counter()
            states = [*session.typed(answer_texts(ex, wrong=count % 2 == 1)), session.press("submit")]
            try:
                ok, messages = await asyncio.wait_for(session.run(states), CHECK_TIMEOUT_S)
            except TimeoutError:
                tally.error("timeout")
                return
            elapsed = time.perf_counter() - started
            exception, alert = page_problems(messages)
            if not ok:
                tally.error("run did not finish")
            elif exception:
                tally.error("exception on the page")
            elif not alert:
                tally.error("no feedback shown")
            else:
                tally.checks.append(elapsed * 1000)
            count += 1
            await asyncio.sleep(max(0.0, period - elapsed))  # the pace of a student, not a wait on the app
    except (websockets.ConnectionClosed, OSError) as problem:
        tally.error(f"connection: {type(problem).__name__}")
    finally:
        if session.socket is not None:
            await session.socket.close()


async def sample_rss(pid: int, samples: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(rss_mb(pid))
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass


async def one_class(url: str, pid: int, n: int, seconds: float, period: float) -> tuple[Tally, list[float]]:
    # warm the server (imports, caches) with one untimed visit of the root page and one student
    await open_root(url)
    await student(url, 10_000, time.perf_counter(), period, Tally(), random.Random(0))
    tally, samples, stop = Tally(), [rss_mb(pid)], asyncio.Event()
    sampler = asyncio.create_task(sample_rss(pid, samples, stop))
    rng = random.Random(n)
    until = time.perf_counter() + seconds
    await asyncio.gather(*(student(url, i, until, period, tally, rng) for i in range(n)))
    stop.set()
    await sampler
    samples.append(rss_mb(pid))
    return tally, samples


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def gc_flags(choice: str) -> tuple[str, ...]:
    return () if choice == "config" else ("--runner.postScriptGC", "true" if choice == "on" else "false")


def post_script_gc(choice: str) -> str:
    """The runner.postScriptGC the server runs with (Streamlit's default is true)."""
    if choice != "config":
        return "true" if choice == "on" else "false"
    import tomllib
    path = ROOT / ".streamlit" / "config.toml"
    config = tomllib.loads(path.read_text()) if path.is_file() else {}
    return str(config.get("runner", {}).get("postScriptGC", True)).lower() + " (config)"


def machine() -> str:
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = "?"
    import streamlit
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), Python "
            f"{platform.python_version()}, streamlit {streamlit.__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="10,30,60", help="class sizes, comma-separated")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each class run")
    parser.add_argument("--period", type=float, default=2.0, help="seconds between a student's checks")
    parser.add_argument("--post-script-gc", choices=("config", "on", "off"), default="config",
                        help="Streamlit's runner.postScriptGC: as .streamlit/config.toml says, or forced")
    args = parser.parse_args()
    flags = gc_flags(args.post_script_gc)
    sizes = [int(x) for x in args.n.split(",") if x]
    if max(sizes) > 200:
        parser.error("at most 200 sessions")

    print(f"# bench_class — {machine()}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}: a fresh server per N, N websocket sessions on loopback, "
          f"a Check every {args.period:g} s each for {args.seconds:g} s; latency = send rerun → script_finished; "
          f"runner.postScriptGC {post_script_gc(args.post_script_gc)}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'N':>4} {'checks':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'load p50':>9} {'load p95':>9} "
          f"{'errors':>7} {'RSS peak MB':>12} {'RSS end MB':>11}  goals p95≤{GOAL_P95_MS:g} ms, RSS≤{GOAL_RSS_MB:g} MB")
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-class-") as folder:
            process, url = start_server(Path(folder), flags=flags)
            try:
                tally, samples = asyncio.run(one_class(url, process.pid, n, args.seconds, args.period))
            finally:
                stop_server(process)
        errors = sum(tally.errors.values())
        print(f"{n:>4} {len(tally.checks):>7} {statistics.median(tally.checks) if tally.checks else float('nan'):8.0f} "
              f"{pct(tally.checks, 0.95):8.0f} {max(tally.checks, default=float('nan')):8.0f} "
              f"{pct(tally.loads, 0.5):9.0f} {pct(tally.loads, 0.95):9.0f} {errors:>7} {max(samples):12.0f} "
              f"{samples[-1]:11.0f}" + (f"  errors: {tally.errors}" if errors else ""))
    print(f"# load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
