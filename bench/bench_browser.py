"""The pages as a learner feels them: click → drawn in Chromium, the real Practice page next to the bare one.

    python bench/bench_browser.py [--reps 6] [--kinds softmax,attention] [--level 2]

`streamlit run` servers on loopback (the app, bench/bare_practice.py, and the bare page with Nagle's algorithm
off as the app has it, bench/bare_nodelay.py, as bench/bench_page.py starts them) and Debian's headless
Chromium driven by Playwright (tests/e2e's StreamlitPage). Each repetition is a new browser context (a new
session) on each page, each page first in turn; each interaction is timed
with time.perf_counter from the click (or the navigation) to the page settled: connected, no script
running, nothing stale, no placeholder (StreamlitPage.settle; the run's script_finished frame first,
where the interaction reruns the script). Each click is made on an idle page (two idle callbacks in a row):
what the typing or the interaction before left for the browser to do is not counted in the next one. The interactions:
    first load     the page opened at ?kind=…&level=…&seed=… (a new seed each time)
    Check          every cell typed (one wrong), then Check (the real page reruns its answer form alone)
    hint           the hints opened, then Hint 1 (the real page: a fragment run)
    Show solution  the button; steps, heatmaps and the cell picker drawn
    New problem    the button
    Formula sheet  the real app's /formulas, from the navigation's link and as a page load with the browser's
                   cache warm (no bare twin: its own bound, ≤ 1 s)
Reported: medians, p95 and the ratios real / bare (goal ≤ 1.1×) and real / bare with Nagle off.
Bounded: loopback only, one browser.
"""

from __future__ import annotations

import argparse
import os
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

import bench_class as bc  # noqa: E402
from bench_page import BARE, CONTENT, in_turn, real_labels, start_bare_servers, twin_of  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

import exercises  # noqa: E402
from tests.e2e.conftest import CHROMIUM_ARGS, VIEWPORT, chromium_path  # noqa: E402
from tests.e2e.streamlit_driver import StreamlitPage  # noqa: E402
from tests.ws_client import answer_texts  # noqa: E402

STEPS = ("first load", "Check", "hint", "Show solution", "New problem")
GOAL_RATIO, GOAL_FORMULAS_S = 1.1, 1.0


# the page's main thread idle: two idle callbacks in a row (work queued by the last one has run too)
IDLE_JS = "() => new Promise(done => requestIdleCallback(() => requestIdleCallback(() => done(), {timeout: 2000}),"
IDLE_JS += " {timeout: 2000}))"


def timed(action: Callable[[], object], app: StreamlitPage | None = None) -> float:
    """ms from the action to its end; with `app`, from an idle page (what the interaction before it, or the
    typing, left to do in the browser is not this one's)."""
    if app is not None:
        app.page.evaluate(IDLE_JS)
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def session(browser, url: str, path: str, typing: Callable[[StreamlitPage], None], labels: dict[str, str],
            hint: str) -> dict[str, float]:
    """One new session through the interactions; ms each."""
    context = browser.new_context(viewport=VIEWPORT, locale="en-US")
    try:
        app = StreamlitPage(context.new_page(), url)
        times = {"first load": timed(lambda: app.open(path))}
        typing(app)
        times["Check"] = timed(lambda: app.rerun(lambda: app.button(labels["check"]).click()), app)
        app.page.locator('[data-testid="stExpander"] summary').filter(has_text=hint.split(" (")[0]).first.click()
        times["hint"] = timed(lambda: app.rerun(lambda: app.button(labels["hint"]).first.click()), app)
        times["Show solution"] = timed(lambda: app.rerun(lambda: app.button(labels["show"]).click()), app)
        times["New problem"] = timed(lambda: app.rerun(lambda: app.button(labels["new"]).click()), app)
        return times
    finally:
        context.close()


def type_real(ex: exercises.Exercise) -> Callable[[StreamlitPage], None]:
    def typing(app: StreamlitPage) -> None:
        for key, text in answer_texts(ex, wrong=True).items():
            app.keyed(key).locator("input").fill(text)
    return typing


def type_bare(app: StreamlitPage) -> None:
    for box in app.page.locator('[data-testid="stForm"] [data-testid="stTextInput"] input').all():
        box.fill("0.5")


def formula_sheet(browser, url: str) -> tuple[float, float]:
    """(from the navigation's link, a page load with the browser's cache warm), ms to the sheet drawn: the
    ways a learner opens it. (A brand-new browser profile would also fetch and compile Streamlit's
    JavaScript, the same for every Streamlit page.)"""
    context = browser.new_context(viewport=VIEWPORT, locale="en-US")
    try:
        app = StreamlitPage(context.new_page(), url)
        app.open("/")
        link = app.page.locator('[data-testid="stSidebarNav"] a[href$="/formulas"]')
        by_link = timed(lambda: app.rerun(link.click))
        app.page.wait_for_selector(".katex")
        app.open("/")
        reload = timed(lambda: app.open("/formulas"))
        return by_link, reload
    finally:
        context.close()


def report(kind: str, level: int, results: dict[str, dict[str, list[float]]]) -> None:
    """Medians and p95, and the real page's ratio to each bare one (the first is the goal's)."""
    print(f"\n## {kind}, level {level}: click → drawn in Chromium")
    bares = [which for which in results if which != "real"]
    print(f"{'interaction':<15} {'real p50':>9} " + " ".join(f"{w + ' p50':>22} {'ratio':>7}" for w in bares)
          + f"   {'real p95':>9}")
    for step in STEPS:
        real = results["real"][step]
        rm = statistics.median(real)
        columns = [f"{statistics.median(results[w][step]):22.0f} {rm / statistics.median(results[w][step]):6.2f}×"
                   for w in bares]
        flag = "ok" if rm / statistics.median(results[bares[0]][step]) <= GOAL_RATIO else "OVER"
        print(f"{step:<15} {rm:9.0f} " + " ".join(columns) + f"   {bc.pct(real, 0.95):9.0f}  {flag}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=6, help="new sessions of each page per kind")
    parser.add_argument("--kinds", default="softmax,attention")
    parser.add_argument("--level", type=int, default=2)
    parser.add_argument("--content", choices=("real", "fixed"), default="real",
                        help="the bare page's formulas: the real page's (default) or short fixed stand-ins")
    args = parser.parse_args()
    CONTENT["real"] = args.content == "real"
    chromium = chromium_path()
    if chromium is None:
        parser.error("Debian's chromium is needed (scripts/install_test_tools.sh)")
    labels = {**real_labels(), "hint": exercises.t("hint.show", level=1, name=exercises.t("hint.level.1"))}
    bare_labels = {**BARE, "hint": "Hint 1: a nudge"}
    print(f"# bench_browser — {bc.machine()}, {Path(chromium).name}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}; {args.reps} new sessions per "
          f"page and kind, real and bare alternating; click → settled, ms")
    with tempfile.TemporaryDirectory(prefix="bench-browser-") as folder, sync_playwright() as playwright:
        real_server, real_url = bc.start_server(Path(folder))
        bare = start_bare_servers(Path(folder))
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            formula_sheet(browser, real_url)  # the app frame runs once, as on any server that has had a visitor
            for kind in [k for k in args.kinds.split(",") if k]:
                levels = exercises.KINDS[kind].LEVELS
                level = args.level if args.level in levels else levels[-1]
                results: dict[str, dict[str, list[float]]] = {w: defaultdict(list) for w in ("real", *bare)}
                for rep in range(args.reps + 1):  # the first of each is untimed: imports, caches, fonts
                    ex = exercises.generate(kind, 700 + rep, level)
                    runs = {"real": (real_url, f"/practice?kind={kind}&level={level}&seed={ex.seed}", type_real(ex),
                                     labels, exercises.t("hint.title"))}
                    runs.update({which: (url, "/?" + urlencode(twin_of(ex)), type_bare, bare_labels, "Hints")
                                 for which, (_server, url) in bare.items()})
                    for which in in_turn(list(runs), rep):
                        times = session(browser, *runs[which])
                        if rep:
                            for step, ms in times.items():
                                results[which][step].append(ms)
                report(kind, level, results)
            sheets = [formula_sheet(browser, real_url) for _ in range(args.reps)]
            for index, way in enumerate(("from the navigation", "a page load, cache warm")):
                times = [pair[index] for pair in sheets]
                median = statistics.median(times)
                print(f"Formula sheet, {way}: p50 {median:.0f} ms, p95 {bc.pct(times, 0.95):.0f} ms "
                      f"({'ok' if median <= GOAL_FORMULAS_S * 1000 else 'OVER'}: ≤ {GOAL_FORMULAS_S:g} s)")
        finally:
            browser.close()
            bc.stop_server(real_server)
            for server, _url in bare.values():
                bc.stop_server(server)
    print(f"# load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
