"""Small writes go out at once: TCP_NODELAY on every connection the server answers (ASGI middleware, app.py).

Streamlit binds its listening socket itself, as `socket.socket(family)`, protocol 0; asyncio turns Nagle's
algorithm off only on sockets whose protocol reads IPPROTO_TCP, so on the connections it accepts Nagle
stays on. A page run sends its elements as many small websocket messages; with Nagle on, all but the first
wait in the kernel for the browser's acknowledgement, which Linux delays by up to 40 ms: on every Check,
hint and page load. The socket is the transport's, reached through the server's `receive` (uvicorn's
protocol and request objects keep the transport as `.transport`); a server that keeps none is left as it is.
"""

from __future__ import annotations

import socket
from typing import Any


class NoDelay:
    """ASGI middleware: turns Nagle's algorithm off on the connection of each request and websocket."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            no_delay(receive)
        await self.app(scope, receive, send)


def no_delay(receive: Any) -> bool:
    """Set TCP_NODELAY on the TCP socket behind `receive`; False where there is none to set."""
    transport = getattr(getattr(receive, "__self__", None), "transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:  # a socket closed under us: nothing to send on anyway
        return False
    return True
