"""The profile cookie is set by the server (ui/profile_cookie.py, served by `streamlit run app.py`):
the first page response carries it HttpOnly, SameSite=Strict, Path=/, and Secure with the `__Host-`
name when the request came over TLS (X-Forwarded-Proto believed only from a trusted proxy); it opens
a profile issued to the browser's own id cookie; a profile handed to the browser by a page is in its
cookie at the next page load; no page source writes a cookie from a script."""

from __future__ import annotations

import asyncio
import os
import re
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import exercises
import storage
from services import profiles
from storage import profiles as store
from tests.streamlit_server import REPO_ROOT, free_port, start_server, stop_server, wait_healthy
from tests.ws_client import Session, answer_texts, page_problems
from ui.profile_cookie import ProfileCookie

ONE_YEAR = 365 * 86400


def get(url: str, headers: dict[str, str] | None = None) -> tuple[str, dict[str, dict[str, str]], list[str]]:
    """GET `url`: its content type, its cookies by name (each with its attributes, lower-case), and the
    raw Set-Cookie values."""
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as response:
        raw = response.headers.get_all("set-cookie") or []
        return response.headers.get("content-type", ""), parse(raw), raw


def parse(raw: list[str]) -> dict[str, dict[str, str]]:
    out = {}
    for value in raw:
        first, *rest = [part.strip() for part in value.split(";")]
        name, _, cookie = first.partition("=")
        attributes = {k.lower(): v for k, _, v in (a.partition("=") for a in rest)}
        out[name] = {"value": cookie, **attributes}
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`streamlit run app.py` on loopback with a SQLite database of its own: (base URL, database path)."""
    folder = tmp_path_factory.mktemp("cookie-server")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ATTENTION_TRUSTED_PROXIES")}
    env.update(ATTENTION_DB_PATH=str(folder / "db.sqlite3"), PYTHONPATH=str(REPO_ROOT),
               STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    port, log = free_port(), folder / "streamlit.log"
    process = start_server(port, log, env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log)
        yield url, folder / "db.sqlite3"
    finally:
        stop_server(process)
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]


@pytest.fixture
def engine(server):
    found = storage.open_engine(f"sqlite:///{server[1]}")
    yield found
    found.dispose()


def assert_server_cookie(cookie: dict[str, str], tls: bool, case: str) -> None:
    assert "httponly" in cookie, f"{case}: not HttpOnly: {cookie}"
    assert cookie.get("samesite") == "Strict" and cookie.get("path") == "/", f"{case}: {cookie}"
    assert int(cookie.get("max-age", 0)) > ONE_YEAR, f"{case}: {cookie}"
    assert ("secure" in cookie) == tls, f"{case}: Secure is {'missing' if tls else 'set'}: {cookie}"
    assert "domain" not in cookie, f"{case}: {cookie}"


def test_the_first_page_response_sets_the_profile_cookie_httponly_and_it_opens_a_profile(server, engine):
    url, _ = server
    for path in ("/", "/practice", "/progress?lang=zh"):
        kind, cookies, _ = get(url + path)
        case = f"GET {path} over plain HTTP"
        assert kind.startswith("text/html"), case
        assert set(cookies) == {profiles.COOKIE, profiles.BROWSER_COOKIE}, f"{case}: {cookies}"
        for cookie in cookies.values():
            assert_server_cookie(cookie, tls=False, case=case)
        secret, browser = cookies[profiles.COOKIE]["value"], cookies[profiles.BROWSER_COOKIE]["value"]
        assert profiles.well_formed_secret(secret) and profiles.well_formed_secret(browser), case
        found = store.browser_of(engine, secret)
        assert found is not None, f"{case}: the cookie opens no profile"
        assert found[1] == profiles.browser_digest(browser), f"{case}: the secret is not issued to this browser"


def test_behind_a_tls_proxy_the_cookie_is_secure_with_the_host_prefix(server, engine):
    url, _ = server
    _, cookies, _ = get(url + "/", {"X-Forwarded-Proto": "https"})  # from 127.0.0.1: the trusted proxy
    case = "GET / with X-Forwarded-Proto https from the trusted proxy"
    names = {profiles.HOST_PREFIX + profiles.COOKIE, profiles.HOST_PREFIX + profiles.BROWSER_COOKIE}
    assert set(cookies) == names, f"{case}: {cookies}"
    for cookie in cookies.values():
        assert_server_cookie(cookie, tls=True, case=case)
    assert store.browser_of(engine, cookies[profiles.HOST_PREFIX + profiles.COOKIE]["value"]) is not None, case


def test_behind_a_tls_proxy_the_page_files_attempts_in_the_profile_of_the_host_cookie(server, engine):
    url, _ = server
    proxy = {"X-Forwarded-Proto": "https"}
    _, cookies, _ = get(url + "/practice", proxy)
    secret = cookies[profiles.HOST_PREFIX + profiles.COOKIE]["value"]
    profile = store.browser_of(engine, secret)[0]
    planted, planted_browser = profiles.new_secret(), profiles.new_secret()  # bare names a sibling site could plant
    planter = store.create_profile(engine, "browser", planted, browser=profiles.browser_digest(planted_browser))
    jar = "; ".join([*(f"{name}={c['value']}" for name, c in cookies.items()),
                     f"{profiles.COOKIE}={planted}", f"{profiles.BROWSER_COOKIE}={planted_browser}"])
    ex = exercises.generate("softmax", seed=3, level=1)

    async def check() -> bool:
        session = Session(url, f"kind={ex.kind}&level={ex.level}&seed={ex.seed}", cookie=jar, headers=proxy)
        await session.connect()
        try:
            ok, _ = await session.run()
            ok2, messages = await session.run([*session.typed(answer_texts(ex, wrong=False)), session.press("submit")])
            return ok and ok2 and page_problems(messages) == (False, True)
        finally:
            await session.socket.close()

    assert _run(check()), "softmax level 1 seed 3: the check behind the TLS proxy showed no feedback"
    stored = storage.list_attempts(engine, profile)
    assert [(a.kind, a.seed) for a in stored] == [("softmax", 3)], f"softmax seed 3 not filed in the cookie's profile: {stored}"
    assert storage.list_attempts(engine, planter) == [], "softmax seed 3 filed in the planted cookie's profile"


def test_a_returning_browser_keeps_its_cookies_and_a_handed_profile_arrives_at_the_next_load(server, engine):
    url, _ = server
    _, first, _ = get(url + "/")
    secret, browser = first[profiles.COOKIE]["value"], first[profiles.BROWSER_COOKIE]["value"]
    sent = {"Cookie": f"{profiles.COOKIE}={secret}; {profiles.BROWSER_COOKIE}={browser}"}
    _, again, _ = get(url + "/progress", sent)
    assert again[profiles.COOKIE]["value"] == secret, "a returning browser keeps its profile cookie"
    assert again[profiles.BROWSER_COOKIE]["value"] == browser, "a returning browser keeps its own id"

    other = store.create_profile(engine, "browser")  # e.g. the profile a recovery code opened on a page
    store.add_handoff(engine, other, profiles.browser_digest(browser))
    _, handed, _ = get(url + "/", sent)
    new = handed[profiles.COOKIE]["value"]
    assert new != secret and store.browser_of(engine, new) == (other, profiles.browser_digest(browser))
    _, after, _ = get(url + "/", {"Cookie": f"{profiles.COOKIE}={new}; {profiles.BROWSER_COOKIE}={browser}"})
    assert after[profiles.COOKIE]["value"] == new, "a handoff is taken once"


def test_a_page_the_browser_has_cached_still_comes_whole_with_its_cookies(server):
    url, _ = server
    with urllib.request.urlopen(url + "/", timeout=10) as response:
        etag, modified = response.headers.get("etag"), response.headers.get("last-modified")
        assert response.headers.get("cache-control") == "no-store", response.headers.get_all("cache-control")
    kind, cookies, _ = get(url + "/", {k: v for k, v in (("If-None-Match", etag), ("If-Modified-Since", modified)) if v})
    assert kind.startswith("text/html") and profiles.COOKIE in cookies, "a revalidated page sets no cookie"


def test_only_pages_carry_the_cookie(server):
    url, _ = server
    index = urllib.request.urlopen(url + "/", timeout=10).read().decode()
    assets = [m.lstrip(".") for m in re.findall(r'(?:src|href)="(\./static/[^"]+)"', index)]
    assert assets, "the page links no static files"
    for path in ("/_stcore/health", "/_stcore/host-config", *assets[:3]):
        _, cookies, raw = get(url + path)
        ours = {profiles.COOKIE, profiles.BROWSER_COOKIE} & {name.removeprefix(profiles.HOST_PREFIX) for name in cookies}
        assert not ours, f"GET {path}: {raw}"


def test_no_page_source_writes_a_cookie_from_a_script():
    sources = [REPO_ROOT / "app.py", *(REPO_ROOT / "app_pages").glob("*.py"), *(REPO_ROOT / "ui").glob("*.py")]
    writers = [str(p.relative_to(REPO_ROOT)) for p in sources if "document.cookie" in p.read_text()]
    assert not writers, f"a script on the page sets a cookie: {writers}"


def test_an_lti_launch_s_session_cookie_signs_the_learner_in_and_the_address_alone_does_not(server, monkeypatch):
    """The session an LMS launch sets as a cookie (ui/lti_routes.launch) is what the served page reads
    (st.context.cookies, ui/lti.py): with it the Assignments page knows the course's learner; the same
    address without it, or with the session in the address, opens nothing."""
    from services import assignments, lti
    from storage.lti import Course
    from tests.ws_client import elements, open_root

    url, path = server
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(path))  # the server's database: its secret signs the session
    code = assignments.create("Launched", [{"kind": "scores", "level": 1, "count": 1}], seed=2).assignment.code
    token = lti.seal_session(lti.Session("learner", code, "p-1", "Learner Zed", Course("iss", "dep", "ctx"), "client"))

    async def page(query: str, cookie: str | None) -> str:
        session = Session(url, query, page="assignments", cookie=cookie)
        await session.connect()
        try:
            ok, messages = await session.run()
            assert ok, f"the Assignments page ({query}) did not finish"
            return " ".join(e.markdown.body for e in elements(messages) if e.WhichOneof("type") == "markdown")
        finally:
            await session.socket.close()

    _run(open_root(url))
    cases = {"the launch's cookie": (f"assignment={code}", f"{lti.SESSION_COOKIE}={token}"),
             "the address alone": (f"assignment={code}", None),
             "the session in the address": (f"assignment={code}&lti={token}", None)}
    seen = {case: "Learner Zed" in _run(page(*sent)) for case, sent in cases.items()}
    assert seen == {"the launch's cookie": True, "the address alone": False, "the session in the address": False}, seen


def asgi_get(headers: dict[str, str], client: tuple[str, int]) -> dict[str, dict[str, str]]:
    """One GET / through ProfileCookie around an app that answers with an HTML page; its cookies."""
    sent: list[dict] = []

    async def page(scope, receive, send):
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html; charset=utf-8")]})
        await send({"type": "http.response.body", "body": b"<html></html>"})

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "scheme": "http", "client": client, "query_string": b"",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    _run(ProfileCookie(page)(scope, receive, send))
    return parse([v.decode() for k, v in sent[0]["headers"] if k == b"set-cookie"])


def test_a_forwarded_proto_from_an_untrusted_address_is_not_believed(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("ATTENTION_TRUSTED_PROXIES", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "db.sqlite3"))
    untrusted = asgi_get({"X-Forwarded-Proto": "https"}, ("203.0.113.7", 50000))
    assert set(untrusted) == {profiles.COOKIE, profiles.BROWSER_COOKIE}, f"from 203.0.113.7: {untrusted}"
    for cookie in untrusted.values():
        assert_server_cookie(cookie, tls=False, case="X-Forwarded-Proto https from 203.0.113.7")
    monkeypatch.setenv("ATTENTION_TRUSTED_PROXIES", "203.0.113.0/24")
    trusted = asgi_get({"X-Forwarded-Proto": "https"}, ("203.0.113.7", 50000))
    assert profiles.HOST_PREFIX + profiles.COOKIE in trusted, f"from a configured proxy: {trusted}"


def test_over_tls_a_cookie_set_by_a_script_before_moves_to_the_host_name(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("ATTENTION_TRUSTED_PROXIES", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "db.sqlite3"))
    opened = profiles.open_browser(None)
    cookie = f"{profiles.COOKIE}={opened.secret}; {profiles.HOST_PREFIX}{profiles.BROWSER_COOKIE}={opened.browser}"
    moved = asgi_get({"X-Forwarded-Proto": "https", "Cookie": cookie}, ("127.0.0.1", 50000))
    case = "over TLS with the profile cookie a script set under the bare name"
    assert moved[profiles.HOST_PREFIX + profiles.COOKIE]["value"] == opened.secret, f"{case}: {moved}"
    assert moved[profiles.COOKIE]["max-age"] == "0", f"{case}: the bare cookie is not dropped: {moved}"
    assert moved[profiles.HOST_PREFIX + profiles.BROWSER_COOKIE]["value"] == opened.browser, case


def _run(coroutine):
    """asyncio.run in a thread of its own: a browser test earlier in the session may leave an event loop
    running in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
