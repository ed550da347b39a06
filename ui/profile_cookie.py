"""The server's side of the profile cookie: an ASGI middleware (st.App in app.py) that puts the
browser's profile secret and its own id in cookies on every page the server sends.

Both are HttpOnly (no script on a page sets or reads them), SameSite=Strict, Path=/, and over TLS
(the connection's own, or X-Forwarded-Proto from a trusted proxy) Secure and `__Host-` prefixed, so no
sibling site can plant them. The page reads them back from st.context.cookies when its session
connects (ui.progress); a profile the page opens later (a recovery code, a fresh one) is handed to the
browser at its next page load (services.profiles.hand_off).
"""

from __future__ import annotations

import logging
from http.cookies import SimpleCookie
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers

from services import db, profiles, throttle

_LOG = logging.getLogger(__name__)
MAX_AGE = profiles.COOKIE_DAYS * 86400
_NOT_PAGES = ("/_stcore/", "/static/", "/media/", "/component/", "/app/static/")


def set_cookie(name: str, value: str, tls: bool, max_age: int = MAX_AGE) -> bytes:
    """One Set-Cookie header value."""
    attributes = f"{name}={value}; Max-Age={max_age}; Path=/; SameSite=Strict; HttpOnly"
    return (attributes + ("; Secure" if tls else "")).encode("latin-1")


def page_cookies(cookies: dict[str, str], tls: bool) -> list[bytes]:
    """The Set-Cookie values for a page load that sent `cookies` (empty when the database is down:
    the page then works under an unsaved profile)."""
    browser_name = profiles.cookie_name(profiles.BROWSER_COOKIE, tls)
    secret_name = profiles.cookie_name(profiles.COOKIE, tls)
    browser = cookies.get(browser_name)
    if not profiles.well_formed_secret(browser):
        browser = profiles.new_secret()
    # over TLS, a secret from before the server set the cookie went by the bare name: it moves over
    sent = cookies.get(secret_name) or cookies.get(profiles.COOKIE)
    try:
        secret = profiles.cookie_for(sent, browser)
    except db.Unavailable:
        _LOG.warning("the profile cookie was not set: the database is unavailable")
        return [set_cookie(browser_name, browser, tls)]
    out = [set_cookie(browser_name, browser, tls), set_cookie(secret_name, secret, tls)]
    if tls:  # the bare names, set by a script in earlier versions, are dropped
        out += [set_cookie(name, "", tls, max_age=0) for name in (profiles.COOKIE, profiles.BROWSER_COOKIE)
                if name in cookies]
    return out


def _cookies(headers: Headers) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001  (a malformed Cookie header: as if none were sent)
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


class ProfileCookie:
    """ASGI middleware: adds the profile cookies to every HTML page (GET) the server answers with."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "GET" or path.startswith(_NOT_PAGES):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        # always the whole page, never "304 Not Modified": only a full page response carries the cookies
        scope = {**scope, "headers": [(k, v) for k, v in scope.get("headers", [])
                                      if k.lower() not in (b"if-none-match", b"if-modified-since")]}
        peer = (scope.get("client") or (None,))[0]
        tls = throttle.over_tls(peer, headers, scope.get("scheme", "http"))

        async def send_with_cookies(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 200:
                sent = Headers(raw=message.get("headers", []))
                if sent.get("content-type", "").startswith("text/html"):
                    values = await run_in_threadpool(page_cookies, _cookies(headers), tls)
                    # this browser's own cookies: the page is never cached
                    kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"]
                    message = {**message, "headers": [*kept, *((b"set-cookie", v) for v in values),
                                                      (b"cache-control", b"no-store")]}
            await send(message)

        await self.app(scope, receive, send_with_cookies)
