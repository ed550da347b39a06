"""Nagle's algorithm is off on the connections the app's server answers (ui/nodelay.py).

The server here is the one Streamlit runs: uvicorn with Streamlit's own settings, on a socket Streamlit's
own code binds. Without the middleware that socket's connections keep Nagle on (each page run's messages
after the first then wait up to 40 ms for the browser's delayed acknowledgement); with it, both a page
request and the page's websocket have TCP_NODELAY set.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest
import uvicorn
from streamlit.web.server.starlette import starlette_server
from websockets.sync.client import connect

from ui.nodelay import NoDelay, no_delay


def _nodelay_of(receive) -> int:
    """TCP_NODELAY of the connection behind the server's `receive` (how the test app looks at it)."""
    return receive.__self__.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def _served(wrapped: bool) -> dict[str, int]:
    """One page request and one websocket to a server set up as Streamlit sets its own up; the
    TCP_NODELAY each connection had when the app ran, by ASGI scope type."""
    seen: dict[str, int] = {}

    async def app(scope, receive, send):
        if scope["type"] == "http":
            seen["http"] = _nodelay_of(receive)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
        elif scope["type"] == "websocket":
            await receive()  # websocket.connect
            seen["websocket"] = _nodelay_of(receive)
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close"})

    sock = starlette_server._bind_socket("127.0.0.1", 0, 16)
    port = sock.getsockname()[1]
    config = uvicorn.Config(NoDelay(app) if wrapped else app, lifespan="off", log_level="warning",
                            **starlette_server._get_uvicorn_config_kwargs())
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start in 20 s"
            time.sleep(0.01)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            assert response.read() == b"ok"
        with connect(f"ws://127.0.0.1:{port}/", open_timeout=10) as ws:
            try:
                ws.recv(timeout=10)
            except Exception:  # noqa: BLE001  (the test app closes at once: the close is the answer)
                pass
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
    return seen


@pytest.mark.parametrize(("wrapped", "expected"), [(False, 0), (True, 1)], ids=["streamlit-alone", "with-NoDelay"])
def test_nagle_is_off_only_with_the_middleware(wrapped: bool, expected: int) -> None:
    seen = _served(wrapped)
    assert {kind: int(bool(value)) for kind, value in seen.items()} == {"http": expected, "websocket": expected}, (
        f"TCP_NODELAY by connection ({'with' if wrapped else 'without'} the middleware): {seen}")


def test_no_socket_to_set_is_left_alone() -> None:
    assert no_delay(object()) is False  # a server that keeps no transport behind receive
    assert no_delay(lambda: None) is False


def test_the_app_server_turns_nagle_off_first() -> None:
    """app.py's st.App has the middleware outermost, so it sees the server's own receive."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("served_app", "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as the server imports it (not __main__): builds the st.App only
    classes = [m.cls for m in module.app._user_middleware]
    assert classes and classes[0] is NoDelay, f"app.py's middleware, outermost first: {classes}"
