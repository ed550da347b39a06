"""Browser end-to-end fixtures: one `streamlit run app.py` on loopback, one headless Debian chromium.

Chromium is the system one (/usr/bin/chromium, Debian's package; .ci/run installs it when missing):
Playwright never downloads a browser here. Without chromium the tests skip on a developer machine and
FAIL under CI (the CI environment variable set), so a CI run can never pass without the browser.

    python -m pytest tests/e2e                                      # the browser tests
    E2E_SCREENSHOTS=docs/screenshots python -m pytest tests/e2e     # …and refresh the committed pictures
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.streamlit_driver import StreamlitPage
from tests.streamlit_server import free_port, start_server, stop_server, wait_healthy

REPO_ROOT = Path(__file__).resolve().parents[2]
VIEWPORT = {"width": 1280, "height": 900}
# Debian's chromium, headless as root, with no call home (the network is closed here)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]


def chromium_path() -> str | None:
    """The chromium binary: $E2E_CHROMIUM when set (and only it), else /usr/bin/chromium, else `chromium`
    on PATH; None when there is none."""
    wanted = os.environ.get("E2E_CHROMIUM")
    candidates = [wanted] if wanted else ["/usr/bin/chromium", shutil.which("chromium")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="session")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        reason = "Debian's chromium is not installed (apt-get install chromium; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(reason + " — required under CI", pytrace=False)
        pytest.skip(reason)
    return path


@contextmanager
def running_app(folder: Path) -> Iterator[str]:
    """`streamlit run app.py` on a free loopback port with its own empty SQLite database in `folder`;
    yields the base URL once healthy, stops the server after, and fails if it logged a traceback."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(ATTENTION_DB_PATH=str(folder / "e2e.sqlite3"), PYTHONPATH=str(REPO_ROOT),
               STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    port = free_port()
    log = folder / "streamlit.log"
    process = start_server(port, log, env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log)
        yield url
    finally:
        stop_server(process)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, f"the server logged an error:\n{text[-3000:]}"


@pytest.fixture(scope="session")
def server_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared server's folder: its log and its SQLite database (e2e.sqlite3)."""
    return tmp_path_factory.mktemp("e2e-server")


@pytest.fixture(scope="session")
def app_url(server_folder: Path) -> Iterator[str]:
    """The base URL of the app server shared by the tests."""
    with running_app(server_folder) as url:
        yield url


@pytest.fixture(scope="session")
def site(browser, app_url: str) -> str:
    """The shared server's URL after one visit of its root page, as any server soon has had.

    (Until a session has run app.py, Streamlit treats a pages/ folder beside app.py as a legacy multipage app and a
    first visitor arriving on /practice gets that page alone; test_practice's fresh-server test keeps
    that case in view. The other tests, and their screenshots, show the app as it normally runs.)"""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        StreamlitPage(context.new_page(), app_url).open("/")
    finally:
        context.close()
    return app_url


@pytest.fixture
def app_db(app_url: str, server_folder: Path) -> Iterator[object]:
    """An engine on the shared server's database (to read what the pages stored)."""
    import storage

    engine = storage.open_engine(f"sqlite:///{server_folder / 'e2e.sqlite3'}")
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def browser(chromium: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Playwright gives the browser a fresh, empty profile directory of its own (--user-data-dir)
        launched = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def people(browser, site: str) -> Iterator[object]:
    """Opens a new browser context (a separate person, their own session) per call; all closed after."""
    contexts = []

    def open_person() -> StreamlitPage:
        context = browser.new_context(viewport=VIEWPORT, locale="en-US", device_scale_factor=1, accept_downloads=True)
        contexts.append(context)
        return StreamlitPage(context.new_page(), site)

    try:
        yield open_person
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def app(browser, site: str) -> Iterator[StreamlitPage]:
    """A new browser context (its own Streamlit session) on the app; closed after the test."""
    context = browser.new_context(viewport=VIEWPORT, locale="en-US", device_scale_factor=1)
    page = context.new_page()
    try:
        yield StreamlitPage(page, site)
    finally:
        context.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each page's picture goes. The committed ones (docs/screenshots, linked from the README) are
    refreshed with E2E_SCREENSHOTS=docs/screenshots; otherwise a temporary folder, so that a test run
    does not rewrite committed files (codes, dates and random seeds differ on every run)."""
    wanted = os.environ.get("E2E_SCREENSHOTS")
    folder = (REPO_ROOT / wanted) if wanted else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
