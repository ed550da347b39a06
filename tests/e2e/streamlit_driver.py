"""Drive a Streamlit app in a real browser, waiting only on Streamlit's own signals.

Streamlit tells the world where it is in three ways, and every wait here uses them, never a sleep:

* the app root carries ``data-test-script-state`` (``initial`` before the first run, then ``running``,
  ``rerunRequested`` or ``notRunning``) and ``data-test-connection-state`` (``CONNECTED`` once the
  websocket is up) — see ``[data-testid="stApp"]`` in the frontend bundle;
* each run ends with a ``script_finished`` ForwardMsg on the websocket ``/_stcore/stream`` (the frames
  are protobuf; we decode them with Streamlit's own ``ForwardMsg``), so an action is known to have
  caused a complete run even when the run is too quick for the DOM attribute to show ``running``;
* while the frontend is still catching up, element containers carry ``data-stale="true"`` and
  lazily loaded widgets show ``stSkeleton`` / ``stSkeletonElement`` placeholders.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Locator, Page, WebSocket
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

TIMEOUT_MS = 30_000
_DONE = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR,
         ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}

# The app is settled: connected, no script running, nothing stale, no placeholder, fonts loaded.
_SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) return false;
  if (app.getAttribute('data-test-connection-state') !== 'CONNECTED') return false;
  if (app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-stale="true"], [data-testid="stSkeleton"], '
                             + '[data-testid="stSkeletonElement"], [data-testid="stAppSkeleton"]')) return false;
  return document.fonts.status === 'loaded';
}"""


def is_run_finished(payload: str | bytes) -> bool:
    """True when a websocket frame is the ForwardMsg that ends a completed script run."""
    if not isinstance(payload, bytes):
        return False
    message = ForwardMsg()
    try:
        message.ParseFromString(payload)
    except Exception:  # noqa: BLE001 - a frame we cannot decode is simply not the end of a run
        return False
    return message.WhichOneof("type") == "script_finished" and message.script_finished in _DONE


class StreamlitPage:
    """A Playwright page on a Streamlit app, with waits that follow the app's runs."""

    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url.rstrip("/")
        self.socket: WebSocket | None = None
        page.on("websocket", self._on_websocket)
        page.set_default_timeout(TIMEOUT_MS)

    def _on_websocket(self, socket: WebSocket) -> None:
        if socket.url.endswith("/_stcore/stream"):
            self.socket = socket

    # ---------------------------------------------------------------- waits

    def settle(self) -> None:
        """Wait until the app is connected, idle and fully drawn; fail on an exception element."""
        self.page.wait_for_function(_SETTLED_JS, timeout=TIMEOUT_MS)
        exceptions = self.page.locator('[data-testid="stException"]')
        assert exceptions.count() == 0, f"the app shows an exception: {exceptions.first.inner_text()[:500]}"

    def open(self, path: str = "/") -> None:
        """Load a URL of the app (path and query) and wait for its first run to be drawn."""
        self.page.goto(self.base_url + path)
        self.settle()

    def rerun(self, action: Callable[[], object]) -> int:
        """Do something that makes the app rerun (a click, a submit), then wait for that run to finish;
        how it finished (ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY when an st.fragment ran alone)."""
        assert self.socket is not None, "the app's websocket is not open"
        with self.socket.expect_event("framereceived", predicate=is_run_finished, timeout=TIMEOUT_MS) as frame:
            action()
        self.settle()
        message = ForwardMsg()
        message.ParseFromString(frame.value)
        return message.script_finished

    # ---------------------------------------------------------------- finding things

    def keyed(self, key: str) -> Locator:
        """The element container of the widget with this key: Streamlit adds the class st-key-<key>,
        every character other than a letter, digit, _ or - written as -."""
        return self.page.locator(".st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key.strip()))

    def button(self, label: str) -> Locator:
        """The button whose accessible name contains `label` (an icon's ligature may precede it)."""
        return self.page.get_by_role("button", name=label)

    def query(self) -> dict[str, str]:
        """The page address's query parameters (one value each)."""
        return {k: v[0] for k, v in parse_qs(urlparse(self.page.url).query).items()}

    def computed_color(self, css: str) -> str:
        """How the browser writes the colour `css` once computed (to compare with to_have_css)."""
        return self.page.evaluate("""(css) => {
          const probe = document.createElement('div');
          probe.style.color = css;
          document.body.appendChild(probe);
          const value = getComputedStyle(probe).color;
          probe.remove();
          return value;
        }""", css)

    def screenshot(self, path: str) -> None:
        """A PNG of the whole settled page, 1280 px wide. Streamlit scrolls inside ``stMain``, not the document,
        so the viewport is made as tall as that content for the picture, then put back."""
        self.settle()
        viewport = self.page.viewport_size or {"width": 1280, "height": 900}
        height = self.page.evaluate(
            "() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight ?? 0")
        self.page.set_viewport_size({"width": viewport["width"], "height": max(viewport["height"], height)})
        try:
            self.settle()
            # let resize observers (Vega charts, columns) lay out again: two animation frames
            self.page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
            self.settle()
            picture = self.page.screenshot(full_page=True, animations="disabled", caret="hide")
        finally:
            self.page.set_viewport_size(viewport)
        save_small_png(picture, path)


def save_small_png(picture: bytes, path: str) -> None:
    """Save a screenshot with a 256-colour palette: a page of flat colours and text loses nothing
    visible and the file is about 2.5 times smaller (the pictures are committed)."""
    from PIL import Image

    image = Image.open(io.BytesIO(picture)).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
