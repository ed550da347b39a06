"""Page cost: the server time of each Practice interaction next to a bare page with the same elements.

    python bench/bench_page.py [--reps 15] [--kinds softmax,attention] [--via server,apptest]

Two ways, both by default, each timing the real app (app.py → app_pages/practice.py) and bench/bare_practice.py
in alternating sessions, each session new:
- server: `streamlit run` servers on loopback (the app, the bare page, and the bare page served as the app is,
  with Nagle's algorithm off: bench/bare_nodelay.py; same flags) and a client
  that speaks Streamlit's websocket protocol (bench/bench_class.py's Session): the time from sending a
  rerun to receiving its `script_finished`, time.perf_counter in the client. This is the script run plus
  everything the server does around it (Streamlit's post-run garbage collection included, which holds
  the interpreter and so delays the messages) and the transfer over loopback; no browser rendering.
- apptest: Streamlit's AppTest in this process, each `at.run()` timed with time.perf_counter (wall) and
  time.process_time (CPU of the whole process): the script run alone. AppTest skips the post-run
  garbage collection, so it understates what a server spends.
The interactions:
    first load     the Practice page opened at ?kind=…&level=…&seed=… (a new seed each repetition, so
                   the per-exercise caches are cold, as for a student's first visit)
    Check          every cell typed (one wrong), then the Check button
    Show solution  the button; the steps, heatmaps and cell picker appear
    New problem    the button; a fresh random problem
The bare page draws the same elements (read off the real exercise: each grid's shape, LaTeX blocks, aids,
solution steps, heatmaps; laid out as ui/answer_grid lays a grid out) and no logic; its formulas are the real
page's LaTeX (`--content fixed`: short fixed stand-ins, which price typesetting a long worked solution as a
3 × 3 matrix), its other content constant;
the server way prints how many elements each page's run sent, side by side. Reported: medians and the
ratio real / bare (goal ≤ 1.1×; Check below 1×, as it reruns the answer form alone), and on the server
real / bare with Nagle off: the page's own work on the same transport (the app turns Nagle off, ui/nodelay.py;
Streamlit alone leaves it on, and each run's messages after the first wait up to 40 ms for the client's
delayed acknowledgement). One untimed session of each warms imports and caches first.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.pop("DATABASE_URL", None)
os.environ["ATTENTION_DB_PATH"] = str(Path(tempfile.mkdtemp(prefix="bench-page-")) / "bench.sqlite3")

import bench_class as bc  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import exercises  # noqa: E402
from exercises.solutions import given_latex  # noqa: E402
from ui.mathview import spaced  # noqa: E402

STEPS = ("first load", "Check", "Show solution", "New problem")
GOAL_RATIO = 1.1
TIMEOUT_S = 120
BARE = {"check": "Check", "show": "Show solution", "new": "New problem"}


def real_labels() -> dict[str, str]:
    return {"check": exercises.t("practice.check"), "show": exercises.t("solution.show"),
            "new": exercises.t("practice.new_problem")}


def shape_of(ex: exercises.Exercise) -> dict[str, str]:
    """What the bare page must draw to match the real one for this exercise."""
    steps = exercises.solve(ex)
    cells = [p for p in ex.parts if not p.is_choice]
    aids = exercises.aids(ex)
    square = {s.name: s.shape[0] for s in steps if s.shape[0] == s.shape[1]}
    square.update({name: len(v) for name, v in ex.given.items()
                   if name not in square and getattr(v, "ndim", 0) == 2 and v.shape[0] == v.shape[1]})
    charts = int(any(name in square for name in ("masked", "scaled", "scores"))) + int("A" in square)
    n = max((square[name] for name in ("masked", "scaled", "scores", "A") if name in square), default=3)
    aid_blocks = sum(1 for x in (aids.table_latex(), aids.sqrt_dk, aids.shapes) if x)
    return {"parts": ",".join(f"{p.shape[0]}x{p.shape[1]}" for p in cells),
            "choices": str(len(ex.parts) - len(cells)), "given": str(len(given_latex(ex))), "aids": str(aid_blocks),
            "steps": str(len(steps)), "charts": str(charts), "n": str(n)}


CONTENT = {"real": True}  # the bare page draws the real page's formulas (--content fixed: its fixed stand-ins)
_CONTENT_DIR = Path(tempfile.mkdtemp(prefix="bench-content-"))
atexit.register(shutil.rmtree, _CONTENT_DIR, True)


def latex_of(ex: exercises.Exercise) -> dict[str, list[str]]:
    """The formulas the real page typesets for `ex`: the given values, the aids, each solution step (exact)."""
    aids = exercises.aids(ex)
    shapes = [r" \quad ".join(latex for _, _, latex in aids.shapes)] if aids.shapes else []
    return {"given": [latex for _, latex in given_latex(ex)],
            "aids": shapes + [x for x in (aids.sqrt_dk, aids.table_latex()) if x],
            "steps": [spaced(step.display(exact=True)) for step in exercises.solve(ex)]}


def twin_of(ex: exercises.Exercise) -> dict[str, str]:
    """The bare page's address parameters for `ex`: its elements (shape_of) and, unless --content fixed, a file
    of the real formulas of `ex` and of another problem of its kind and level (what New problem draws)."""
    query = shape_of(ex)
    if CONTENT["real"]:
        path = _CONTENT_DIR / f"{ex.id}.json"
        if not path.exists():
            other = exercises.generate(ex.kind, ex.seed + 10_000, ex.level)
            path.write_text(json.dumps([latex_of(ex), latex_of(other)]), encoding="utf-8")
        query["content"] = str(path)
    return query


def element_count(messages: list) -> int:
    """Elements and blocks a run sent (what the browser draws; the bare page must match the real one)."""
    return sum(1 for m in messages if m.WhichOneof("type") == "delta"
               and m.delta.WhichOneof("type") in ("new_element", "add_block"))


# ---------------------------------------------------------------- through a server


async def server_session(url: str, query: dict[str, str], texts: Callable[[bc.Session], dict[str, str]],
                         labels: dict[str, str]) -> dict[str, float]:
    """One new session: the four interactions, each timed from sending the rerun to its script_finished."""
    session = bc.Session(url, urlencode(query))
    times: dict[str, float] = {}

    async def timed_run(step: str, states: list) -> None:
        started = time.perf_counter()
        ok, messages = await session.run(states)
        times[step] = (time.perf_counter() - started) * 1000
        times[f"{step} elements"] = element_count(messages)
        assert ok, f"{step} did not finish"

    await session.connect()
    try:
        await timed_run("first load", [])
        await timed_run("Check", [*session.typed(texts(session)), session.press("submit")])
        await timed_run("Show solution", [session.press(labels["show"])])
        await timed_run("New problem", [session.press(labels["new"])])
    finally:
        await session.socket.close()
    return times


def bare_texts(session: bc.Session) -> dict[str, str]:
    return {key: "0.5" for key in session.widgets if key.startswith("bare.0.") and ".paste." not in key}


BARE_SCRIPTS = {"bare": "bench/bare_practice.py", "bare, Nagle off": "bench/bare_nodelay.py"}


def start_bare_servers(folder: Path, flags: tuple[str, ...] = ()) -> dict[str, tuple]:
    """A server for each bare page (BARE_SCRIPTS), each in its own folder under `folder`: {name: (process, url)}."""
    servers = {}
    for which, script in BARE_SCRIPTS.items():
        (folder / script.replace("/", "-")).mkdir()
        servers[which] = bc.start_server(folder / script.replace("/", "-"), script=script, flags=flags)
    return servers


def in_turn(items: list, rep: int) -> list:
    """`items` starting from the rep-th (each page goes first in turn)."""
    return items[rep % len(items):] + items[:rep % len(items)]


async def via_server(kind: str, level: int, reps: int, flags: tuple[str, ...]) -> dict[str, dict[str, list]]:
    results = {which: defaultdict(list) for which in ("real", *BARE_SCRIPTS)}
    with tempfile.TemporaryDirectory(prefix="bench-page-") as folder:
        real_server, real_url = bc.start_server(Path(folder), flags=flags)
        bare = start_bare_servers(Path(folder), flags)
        try:
            await bc.open_root(real_url)  # see bench_class.open_root: run the app frame, not app_pages/ alone
            warm = exercises.generate(kind, 99_999, level)
            await server_session(real_url, {"kind": kind, "level": str(level), "seed": "99999"},
                                 lambda _s: bc.answer_texts(warm, wrong=True), real_labels())
            for _server, url in bare.values():
                await server_session(url, twin_of(warm), bare_texts, BARE)
            for rep in range(reps):
                seed = 500 + rep
                ex = exercises.generate(kind, seed, level)
                runs = [("real", lambda ex=ex, seed=seed: server_session(
                    real_url, {"kind": kind, "level": str(level), "seed": str(seed)},
                    lambda _s: bc.answer_texts(ex, wrong=True), real_labels()))]
                runs += [(which, lambda url=url, ex=ex: server_session(url, twin_of(ex), bare_texts, BARE))
                         for which, (_server, url) in bare.items()]
                for which, run in in_turn(runs, rep):
                    for step, ms in (await run()).items():
                        results[which][step].append(ms)
        finally:
            bc.stop_server(real_server)
            for server, _url in bare.values():
                bc.stop_server(server)
    return results


# ---------------------------------------------------------------- in process, with AppTest


def timed(at: AppTest) -> float:
    started = time.perf_counter()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return (time.perf_counter() - started) * 1000


def click(at: AppTest, label: str) -> None:
    next(b for b in at.button if b.label == label).click()


def apptest_session(script: str, query: dict[str, str], page: str | None, texts: list[str] | None,
                    labels: dict[str, str]) -> dict[str, float]:
    at = AppTest.from_file(str(ROOT / script), default_timeout=TIMEOUT_S)
    at.query_params.update(query)
    if page:
        at.switch_page(page)
    times = {"first load": timed(at)}
    boxes = [box for box in at.text_input if box.key and (box.key.startswith("ans-") or box.key.startswith("bare.0."))]
    for box, text in zip(boxes, texts or ["0.5"] * len(boxes)):
        box.input(text)
    click(at, labels["check"])
    times["Check"] = timed(at)
    click(at, labels["show"])
    times["Show solution"] = timed(at)
    click(at, labels["new"])
    times["New problem"] = timed(at)
    return times


def via_apptest(kind: str, level: int, reps: int) -> dict[str, dict[str, list]]:
    def real(seed: int) -> dict[str, float]:
        ex = exercises.generate(kind, seed, level)
        texts = list(bc.answer_texts(ex, wrong=True).values())
        return apptest_session("app.py", {"kind": kind, "level": str(level), "seed": str(seed)},
                               "app_pages/practice.py", texts, real_labels())

    def bare(seed: int) -> dict[str, float]:
        return apptest_session("bench/bare_practice.py", twin_of(exercises.generate(kind, seed, level)),
                               None, None, BARE)

    real(99_999), bare(99_999)  # warm imports and Streamlit's caches, untimed
    results = {"real": {s: [] for s in STEPS}, "bare": {s: [] for s in STEPS}}
    for rep in range(reps):
        order = [("real", real), ("bare", bare)] if rep % 2 == 0 else [("bare", bare), ("real", real)]
        for which, run in order:
            for step, ms in run(500 + rep).items():
                results[which][step].append(ms)
    return results


def report(title: str, results: dict[str, dict[str, list]]) -> None:
    """Medians and p95 of each page, and the real page's ratio to each bare one (the first is the goal's)."""
    print(title)
    bares = [which for which in results if which != "real"]
    print(f"{'interaction':<15} {'real p50':>9} " + " ".join(f"{w + ' p50':>22} {'ratio':>7}" for w in bares)
          + f"   {'real p95':>9}  {'elements real/bare':>18}")
    for step in STEPS:
        real = results["real"][step]
        rm, rp = statistics.median(real), sorted(real)[int(0.95 * (len(real) - 1))]
        columns = []
        for which in bares:
            bm = statistics.median(results[which][step])
            columns.append(f"{bm:22.1f} {rm / bm:6.2f}×")
        flag = "ok" if rm / statistics.median(results[bares[0]][step]) <= GOAL_RATIO else "OVER"
        counts = [results[w].get(f"{step} elements") for w in ("real", bares[0])]
        drawn = f"{counts[0][-1]}/{counts[1][-1]}" if all(counts) else "–"
        print(f"{step:<15} {rm:9.1f} " + " ".join(columns) + f"   {rp:9.1f}  {drawn:>18}  {flag}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15, help="sessions of each page per kind and way")
    parser.add_argument("--kinds", default="softmax,attention", help="comma-separated kind ids")
    parser.add_argument("--level", type=int, default=2)
    parser.add_argument("--via", default="server,apptest", help="server, apptest or both (comma-separated)")
    parser.add_argument("--content", choices=("real", "fixed"), default="real",
                        help="the bare page's formulas: the real page's (default) or short fixed stand-ins")
    parser.add_argument("--post-script-gc", choices=("config", "on", "off"), default="config",
                        help="Streamlit's runner.postScriptGC for the servers (see bench_class.py)")
    args = parser.parse_args()
    ways = [w for w in args.via.split(",") if w]
    CONTENT["real"] = args.content == "real"

    print(f"# bench_page — {bc.machine()}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}; {args.reps} new sessions per "
          f"page, kind and way, real and bare alternating; times in ms; servers with runner.postScriptGC "
          f"{bc.post_script_gc(args.post_script_gc)}")
    for kind in [k for k in args.kinds.split(",") if k]:
        levels = exercises.KINDS[kind].LEVELS
        level = args.level if args.level in levels else levels[-1]
        shape = shape_of(exercises.generate(kind, 500, level))
        print(f"\n## {kind}, level {level} (bare page: {', '.join(f'{k}={v}' for k, v in shape.items())})")
        if "server" in ways:
            report("server: send rerun → script_finished over the websocket",
                   asyncio.run(via_server(kind, level, args.reps, bc.gc_flags(args.post_script_gc))))
        if "apptest" in ways:
            report("apptest: at.run() wall time in process (no post-run GC)", via_apptest(kind, level, args.reps))
    print(f"\ngoal: real / bare ≤ {GOAL_RATIO}× (medians); load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
