"""Assignments that open fast: a class opening a 10-item assignment at once, and one student a 40-item one.

    python bench/bench_assignment.py [--n 30] [--items 10] [--big 40] [--reps 5] [--one-page] [--replicas R]

How it is measured:
- A fresh `streamlit run app.py` on 127.0.0.1 with its own temporary SQLite file (bench_class.py's server),
  warmed by one visit of the root page and one untimed student on each assignment.
- The class: an assignment of `--items` exercises (kinds and levels mixed, one class set) with a class
  list of `--n` names; each student opens their personal link (?assignment=CODE&t=TOKEN), so the first run
  draws their name and the first page of exercises. All N connect at the same moment (asyncio.gather).
  "open": connect + that first run, until its script_finished (time.perf_counter in the client); "next":
  the rerun of pressing Next (the second page), send → script_finished.
- One student, a big set: an assignment of `--big` exercises (attention, backprop, masking, softmax) opened
  by one personal link at a time, `--reps` times, alone on the server: the server time of the open (send
  the first rerun → its script_finished, the websocket already connected).
- Errors: a run that does not finish successfully, an exception element, no answer inputs drawn, a timeout
  (30 s), a dropped connection.
- `--replicas R` runs the same class through the scale-out recipe instead (deploy/cluster.py: nginx in
  front of R replicas with the production flags, all on one throwaway PostgreSQL), each replica warmed
  directly; server CPU is the sum over the replicas.
- `--one-page` starts the server with ATTENTION_PAGE_WIDGETS=100000: every exercise on one page, as before
  pages (for the before/after figures).
Bounded: at most 200 sessions, loopback only; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_class as bc  # noqa: E402
import websockets  # noqa: E402
from streamlit.proto.WidgetStates_pb2 import WidgetState  # noqa: E402

import storage  # noqa: E402
from deploy import cluster as deploy  # noqa: E402
from tests.ws_client import Session, elements, open_root, page_problems  # noqa: E402

TIMEOUT_S = 30.0
GOAL_CLASS_P95_MS, GOAL_BIG_MS = 2000.0, 1500.0
CLASS_ITEMS = [("softmax", 2), ("scores", 1), ("masking", 2), ("weighted_sum", 1), ("attention", 1),
               ("scaling", 1), ("projection", 2), ("concepts", 1), ("grad_softmax", 1), ("variance", 1)]
BIG_ITEMS = [("attention", 2), ("backprop", 2), ("masking", 3), ("softmax", 2)]


@dataclass
class Tally:
    opens: list[float] = field(default_factory=list)  # ms
    turns: list[float] = field(default_factory=list)  # ms
    errors: dict[str, int] = field(default_factory=dict)
    cpu: float = 0.0  # the server's CPU seconds over the run

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


def items_of(kinds: list[tuple[str, int]], count: int) -> list[dict]:
    """`count` exercises over these (kind, level)s, in rows of equal kinds."""
    per, extra = divmod(count, len(kinds))
    rows = [{"kind": k, "level": lv, "count": per + (1 if i < extra else 0)} for i, (k, lv) in enumerate(kinds)]
    return [r for r in rows if r["count"]]


def make_assignment(engine, title: str, items: list[dict], names: list[str]) -> tuple[str, dict[str, str]]:
    created = storage.create_assignment(engine, title, items, seed=7, rules={"attempts": 0})
    code = created.assignment.code
    return code, storage.set_roster(engine, code, created.teacher_key, names)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drew_inputs(messages) -> int:
    return sum(1 for e in elements(messages) if e.WhichOneof("type") in ("text_input", "text_area", "radio"))


def next_button(messages) -> WidgetState | None:
    """A press of the form's Next button (ws_client keeps one id for all of a form's submit buttons)."""
    for e in elements(messages):
        if e.WhichOneof("type") == "button" and e.button.label == "Next exercises" and not e.button.disabled:
            return WidgetState(id=e.button.id, trigger_value=True)
    return None


async def student(url: str, code: str, token: str, tally: Tally) -> None:
    session = Session(url, f"assignment={code}&t={token}", page="assignments")
    try:
        t0 = time.perf_counter()
        await session.connect()
        ok, messages = await asyncio.wait_for(session.run(), TIMEOUT_S)
        elapsed = (time.perf_counter() - t0) * 1000
        if not ok or page_problems(messages)[0] or not drew_inputs(messages):
            tally.error("open failed")
            return
        tally.opens.append(elapsed)
        following = next_button(messages)
        if following is None:
            return
        t0 = time.perf_counter()
        ok, messages = await asyncio.wait_for(session.run([following]), TIMEOUT_S)
        if not ok or page_problems(messages)[0] or not drew_inputs(messages):
            tally.error("next page failed")
            return
        tally.turns.append((time.perf_counter() - t0) * 1000)
    except TimeoutError:
        tally.error("timeout")
    except (websockets.ConnectionClosed, OSError) as problem:
        tally.error(f"connection: {type(problem).__name__}")
    finally:
        if session.socket is not None:
            await session.socket.close()


async def alone(url: str, code: str, token: str, tally: Tally) -> None:
    """One open, the websocket connected first: the server time of the run that draws the set."""
    session = Session(url, f"assignment={code}&t={token}", page="assignments")
    await session.connect()
    try:
        t0 = time.perf_counter()
        ok, messages = await asyncio.wait_for(session.run(), TIMEOUT_S * 4)
        elapsed = (time.perf_counter() - t0) * 1000
        if not ok or page_problems(messages)[0] or not drew_inputs(messages):
            tally.error("open failed")
        else:
            tally.opens.append(elapsed)
            tally.turns.append(drew_inputs(messages))
    finally:
        await session.socket.close()


async def run_all(url: str, pids: list[int], args, cls: tuple[str, dict[str, str]], big: tuple[str, dict[str, str]],
                  warm_urls: list[str] | None = None):
    (code, tokens), (big_code, big_tokens) = cls, big
    names = list(tokens)
    for index, direct in enumerate(warm_urls or [url]):  # warm: imports, caches, the stored set read once
        await open_root(direct)
        await student(direct, code, tokens[f"Warm {index}"], Tally())
        await alone(direct, big_code, big_tokens[f"Warm {index}"], Tally())
    samples, stop = [sum(bc.rss_mb(pid) for pid in pids)], asyncio.Event()
    sampler = asyncio.create_task(sample_rss(pids, samples, stop))
    tally = Tally()
    cpu = sum(cpu_s(pid) for pid in pids)
    await asyncio.gather(*(student(url, code, tokens[n], tally) for n in names[:args.n]))
    tally.cpu = sum(cpu_s(pid) for pid in pids) - cpu
    big_tally = Tally()
    cpu = sum(cpu_s(pid) for pid in pids)
    for i in range(args.reps):
        await alone(url, big_code, big_tokens[f"Big {i}"], big_tally)
    big_tally.cpu = sum(cpu_s(pid) for pid in pids) - cpu
    stop.set()
    await sampler
    return tally, big_tally, max(samples)


async def sample_rss(pids: list[int], samples: list[float], stop: asyncio.Event) -> None:
    """The servers' summed RSS every 0.2 s until `stop`."""
    while not stop.is_set():
        samples.append(sum(bc.rss_mb(pid) for pid in pids))
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except TimeoutError:
            pass


def make_both(engine, args) -> tuple[tuple[str, dict[str, str]], tuple[str, dict[str, str]]]:
    warm = [f"Warm {i}" for i in range(max(args.replicas, 1))]
    cls = make_assignment(engine, "Class", items_of(CLASS_ITEMS, args.items),
                          [f"Student {i}" for i in range(args.n)] + warm)
    big = make_assignment(engine, "Big", items_of(BIG_ITEMS, args.big), [f"Big {i}" for i in range(args.reps)] + warm)
    engine.dispose()
    return cls, big


def run_single(args):
    with tempfile.TemporaryDirectory(prefix="bench-assignment-") as folder:
        cls, big = make_both(storage.open_engine(f"sqlite:///{folder}/bench.sqlite3"), args)
        process, url = bc.start_server(Path(folder))
        try:
            return asyncio.run(run_all(url, [process.pid], args, cls, big))
        finally:
            bc.stop_server(process)


def run_cluster(args):
    port = deploy.free_port()
    database_url = deploy.start_throwaway_postgres(port)
    try:
        cls, big = make_both(storage.open_engine(database_url), args)
        with deploy.Cluster(replicas=args.replicas, database_url=database_url) as cluster:  # replicas get os.environ
            pids = [p.pid for p in cluster.processes]
            return asyncio.run(run_all(cluster.url, pids, args, cls, big, warm_urls=cluster.replica_urls))
    finally:
        deploy.stop_throwaway_postgres(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="students opening the class's assignment at once")
    parser.add_argument("--items", type=int, default=10, help="exercises in the class's assignment")
    parser.add_argument("--big", type=int, default=40, help="exercises in the big assignment")
    parser.add_argument("--reps", type=int, default=5, help="opens of the big assignment, one at a time")
    parser.add_argument("--one-page", action="store_true", help="every exercise on one page (before pages)")
    parser.add_argument("--replicas", type=int, default=0,
                        help="through nginx in front of this many replicas on PostgreSQL (0: one server, SQLite)")
    args = parser.parse_args()
    if not 1 <= args.n <= 200:
        parser.error("1 to 200 students")
    if not 0 <= args.replicas <= 8:
        parser.error("0 to 8 replicas")
    if args.replicas and deploy.nginx_binary() is None:
        parser.error("--replicas needs Debian's nginx (apt-get install nginx)")
    os.environ["ATTENTION_SECRET"] = "bench"  # the server and this process key variants alike
    if args.one_page:
        os.environ["ATTENTION_PAGE_WIDGETS"] = "100000"
    print(f"# bench_assignment — {bc.machine()}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}: {args.n} students open a {args.items}-item assignment at once "
          f"(personal links), then one student a {args.big}-item one {args.reps}×; "
          f"{'every exercise on one page' if args.one_page else 'a page at a time'}; "
          f"{f'nginx + {args.replicas} replicas on PostgreSQL' if args.replicas else 'one server on SQLite'}; "
          f"load average {os.getloadavg()[0]:.1f}")
    tally, big_tally, rss = run_cluster(args) if args.replicas else run_single(args)
    pct = bc.pct
    errors = sum(tally.errors.values()) + sum(big_tally.errors.values())
    print(f"class, {args.n} × {args.items} items: open p50 {pct(tally.opens, 0.5):.0f} ms, "
          f"p95 {pct(tally.opens, 0.95):.0f} ms, max {max(tally.opens, default=float('nan')):.0f} ms; "
          f"next page p50 {pct(tally.turns, 0.5):.0f} ms, "
          f"p95 {pct(tally.turns, 0.95):.0f} ms; server CPU {tally.cpu:.1f} s "
          f"({1000 * tally.cpu / max(len(tally.opens) + len(tally.turns), 1):.0f} ms a run); "
          f"goal p95 ≤ {GOAL_CLASS_P95_MS:.0f} ms")
    print(f"one student, {args.big} items: open median "
          f"{statistics.median(big_tally.opens) if big_tally.opens else float('nan'):.0f} ms, max "
          f"{max(big_tally.opens, default=float('nan')):.0f} ms ({int(max(big_tally.turns, default=0))} inputs drawn), "
          f"server CPU {1000 * big_tally.cpu / max(len(big_tally.opens), 1):.0f} ms an open; "
          f"goal ≤ {GOAL_BIG_MS:.0f} ms")
    print(f"errors {errors}" + (f": {tally.errors} {big_tally.errors}" if errors else "") +
          f"; server RSS peak {rss:.0f} MB; load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
