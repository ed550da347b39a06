"""The LTI 1.3 endpoints the LMS talks to, served beside the pages by st.App (app.py):

    /lti/login      OIDC third-party login initiation (GET or POST) → redirect to the platform
    /lti/launch     the platform posts the id_token here → the assignment or gradebook (the session in an
                    HttpOnly cookie, a one-time code in the address), or the "add an activity" form
    /lti/jwks       the tool's public keys (current and previous)
    /lti/deep_link  the "add an activity" form's answer to the platform (POST)

Small server-made HTML (every value escaped); the work is services.lti's, run off the event loop.
Every refused launch counts against its source in the shared throttle (services.throttle).
"""

from __future__ import annotations

import logging
import os
import secrets
import urllib.parse
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

import exercises
from exercises.i18n import DEFAULT_LANG, languages, t
from exercises.i18n.escape import html
from exercises.teacher.assignments import MAX_COUNT, AssignmentError
from services import assignments, db, lti, profiles, throttle
from ui.profile_cookie import set_cookie

_LOG = logging.getLogger(__name__)
STATE_COOKIE = "lti_state"
MAX_BODY = 64 * 1024  # bytes of a form the platform or the instructor posts
BASE_URL_ENV = "ATTENTION_PUBLIC_URL"  # the tool's address as the LMS knows it (else the request's own)
THROTTLE = throttle.SHARED["lti"]  # refused launches, per source and for everyone


def _peer(request: Request) -> tuple[str | None, dict[str, str]]:
    return (request.client.host if request.client else None), dict(request.headers)


def _source(request: Request) -> str:
    return throttle.source_of(throttle.client_address(*_peer(request)))


def _tls(request: Request) -> bool:
    peer, headers = _peer(request)
    return throttle.over_tls(peer, headers, request.url.scheme)


def base_url(request: Request) -> str:
    configured = os.environ.get(BASE_URL_ENV, "").strip().rstrip("/")
    if configured:
        return configured
    scheme = "https" if _tls(request) else "http"
    return f"{scheme}://{request.headers.get('host', request.url.netloc)}"


async def _form(request: Request, with_query: bool = True) -> dict[str, str] | None:
    """The url-encoded form (and query) of a request, None when it is larger than MAX_BODY."""
    params = dict(request.query_params) if with_query else {}
    if request.method != "POST":
        return params
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), max_num_fields=50)
    return {**params, **{k: v[0] for k, v in fields.items()}}


def _lang(value: Any) -> str:
    code = str(value or "").split("-")[0].lower()
    return code if code in languages() else DEFAULT_LANG


def _browser_lang(request: Request) -> str:
    """The browser's first language where no launch says it yet (zh-CN → zh)."""
    return _lang(request.headers.get("accept-language", "").split(",")[0])


def _page(title: str, body: str, status: int = 200, lang: str = DEFAULT_LANG) -> HTMLResponse:
    return HTMLResponse(f'<!doctype html><html lang="{html(lang)}"><head><meta charset="utf-8">'
                        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
                        f"<title>{html(title)}</title></head><body>{body}</body></html>", status_code=status,
                        headers={"Cache-Control": "no-store"})


def _refused(reason: str, lang: str = DEFAULT_LANG, status: int = 400) -> HTMLResponse:
    return _page(t("lti.refused.title", lang), f"<h1>{html(t('lti.refused.title', lang))}</h1>"
                 f"<p>{html(t('lti.refused.text', lang))}</p><p><code>{html(reason)}</code></p>", status, lang)


def _unavailable(lang: str = DEFAULT_LANG) -> HTMLResponse:
    return _page(t("lti.refused.title", lang), f"<p>{html(t('lti.unavailable', lang))}</p>", 503, lang)


def _too_many(seconds: float) -> HTMLResponse:
    return _page(t("lti.refused.title"), f"<p>{html(t('throttle.wait', seconds=max(1, int(seconds + 0.999))))}</p>",
                 429)


async def login(request: Request) -> Response:
    form = await _form(request)
    if form is None:
        return _refused("too_large", status=413)
    try:
        started = await run_in_threadpool(lti.login, form, base_url(request) + "/lti/launch")
    except lti.Refused as err:
        return _refused(err.reason, _browser_lang(request))
    except db.Unavailable:
        return _unavailable(_browser_lang(request))
    response = RedirectResponse(started.redirect, status_code=302)
    tls = _tls(request)
    # the launch is a cross-site POST from the platform: the cookie must travel with it (None needs TLS)
    response.set_cookie(STATE_COOKIE, started.state, max_age=int(lti.LOGIN_TTL.total_seconds()), path="/lti/",
                        httponly=True, secure=tls, samesite="none" if tls else "lax")
    return response


async def launch(request: Request) -> Response:
    source = _source(request)
    wait = await run_in_threadpool(THROTTLE.remaining, source)
    if wait > 0:
        return _too_many(wait)
    form = await _form(request)
    if form is None:
        return _refused("too_large", status=413)
    try:
        checked = await run_in_threadpool(lti.verify, form.get("id_token", ""), form.get("state", ""),
                                          request.cookies.get(STATE_COOKIE))
        landing = await run_in_threadpool(lti.land, checked)
    except lti.Refused as err:
        _LOG.info("LTI launch refused: %s", err.reason)
        await run_in_threadpool(THROTTLE.failed, source)
        return _refused(err.reason, _browser_lang(request))
    except db.Unavailable:
        return _unavailable(_browser_lang(request))
    await run_in_threadpool(THROTTLE.succeeded, source)  # a classmate's refused launch no longer counts
    lang = _lang(checked.claims.get("locale"))
    if landing.path == "/lti/deep_link":  # the builder itself: its forms carry the session, no address does
        response = _page(t("lti.dl.title", lang), _builder(landing.session, lang), lang=lang)
        response.delete_cookie(STATE_COOKIE, path="/lti/")
        return response
    # Not a redirect: the LMS's cross-site POST would carry on into the page without the SameSite=Strict
    # profile cookies, and the page would hand this browser a new profile. A page of our own that moves on
    # makes the next request same-site, so the browser's own cookies come along, the session's among them.
    # The address carries only a one-time code (ui/lti.py spends it); the session is this HttpOnly cookie.
    target = landing.path + "?" + urllib.parse.urlencode(landing.query)
    response = _page(t("lti.continue", lang), f'<meta http-equiv="refresh" content="0; url={html(target)}">'
                     f'<p><a href="{html(target)}">{html(t("lti.continue", lang))}</a></p>', lang=lang)
    tls = _tls(request)
    response.headers.append("set-cookie", set_cookie(profiles.cookie_name(lti.SESSION_COOKIE, tls), landing.session,
                                                     tls, max_age=lti.SESSION_TTL_S).decode("latin-1"))
    response.delete_cookie(STATE_COOKIE, path="/lti/")
    return response


async def jwks(_request: Request) -> Response:
    try:
        keys = await run_in_threadpool(lti.jwks)
    except db.Unavailable:
        return JSONResponse({"keys": []}, status_code=503)
    return JSONResponse(keys, headers={"Cache-Control": "max-age=300"})


def _builder(token: str, lang: str, problem: str | None = None) -> str:
    options = "".join(f'<option value="{html(kind_id)}">{html(t(f"kind.{kind_id}.title", lang))}</option>'
                      for kind_id in exercises.KINDS)
    levels = "".join(f'<option value="{n}">{n}</option>' for n in (1, 2, 3))
    error = f'<p role="alert">{html(problem)}</p>' if problem else ""
    return (f"<h1>{html(t('lti.dl.title', lang))}</h1><p>{html(t('lti.dl.intro', lang))}</p>{error}"
            f'<form method="post" action="/lti/deep_link"><input type="hidden" name="lti" value="{html(token)}">'
            f'<p><label>{html(t("lti.dl.name", lang))} <input name="title" maxlength="200" required></label></p>'
            f'<p><label>{html(t("lti.dl.kind", lang))} <select name="kind">{options}</select></label></p>'
            f'<p><label>{html(t("lti.dl.level", lang))} <select name="level">{levels}</select></label></p>'
            f'<p><label>{html(t("lti.dl.count", lang))} <input name="count" type="number" min="1" '
            f'max="{MAX_COUNT}" value="3"></label></p>'
            f'<p><button type="submit">{html(t("lti.dl.add", lang))}</button></p></form>'
            f"<h2>{html(t('lti.dl.pick_title', lang))}</h2>"
            f'<form method="post" action="/lti/deep_link"><input type="hidden" name="lti" value="{html(token)}">'
            f'<p><label>{html(t("lti.dl.code", lang))} <input name="code" maxlength="40" required></label></p>'
            f'<p><label>{html(t("lti.dl.key", lang))} <input name="key" type="password" maxlength="100" '
            f'required></label></p><p><button type="submit">{html(t("lti.dl.link", lang))}</button></p></form>')


async def deep_link(request: Request) -> Response:
    form = await _form(request, with_query=False)  # the session rides in the form, never in an address
    if form is None:
        return _refused("too_large", status=413)
    token = form.get("lti", "")
    try:
        session = await run_in_threadpool(lti.deep_linking, token)
    except lti.Refused as err:
        return _refused(err.reason, status=403)
    lang = _lang(session.deep_link.get("lang"))
    if form.get("code"):  # an assignment the instructor made before, with its teacher key
        return await _pick(request, form, session, token, lang)
    try:
        created = await run_in_threadpool(assignments.create, form.get("title"), [
            {"kind": form.get("kind"), "level": form.get("level"), "count": form.get("count")}],
            secrets.randbelow(assignments.MAX_SEED))
        return_url, answer = await run_in_threadpool(lti.deep_link_response, session, created)
    except AssignmentError as err:
        return _page(t("lti.dl.title", lang), _builder(token, lang, err.message.render(lang)), 400, lang)
    except lti.Refused as err:
        return _refused(err.reason, lang)
    except db.Unavailable:
        return _unavailable(lang)
    return _back_to_platform(return_url, answer, lang)


async def _pick(request: Request, form: dict[str, str], session: lti.Session, token: str, lang: str) -> Response:
    """Link an existing assignment: its teacher key is a secret form, throttled like the others."""
    source = _source(request)
    wait = await run_in_threadpool(THROTTLE.remaining, source)
    if wait > 0:
        return _too_many(wait)
    code, key = form.get("code", ""), form.get("key", "")
    try:
        right = await run_in_threadpool(assignments.verify_key, code, key)
        found = await run_in_threadpool(assignments.load, code) if right else None
        if found is None:
            await run_in_threadpool(THROTTLE.failed, source, f"{code}:{key}")
            return _page(t("lti.dl.title", lang), _builder(token, lang, t("lti.dl.key_wrong", lang)), 400, lang)
        if not found.has_roster and await run_in_threadpool(assignments.submitted_count, found):
            # its students typed their names: the course's learners would join a class list they are not on
            return _page(t("lti.dl.title", lang), _builder(token, lang, t("lti.dl.pick_started", lang)), 400, lang)
        return_url, answer = await run_in_threadpool(lti.deep_link_response, session,
                                                     assignments.Created(found, key, True))
    except (assignments.MalformedCode, assignments.MalformedKey):
        await run_in_threadpool(THROTTLE.failed, source, f"{code}:{key}")
        return _page(t("lti.dl.title", lang), _builder(token, lang, t("lti.dl.key_wrong", lang)), 400, lang)
    except lti.Refused as err:
        return _refused(err.reason, lang)
    except db.Unavailable:
        return _unavailable(lang)
    return _back_to_platform(return_url, answer, lang)


def _back_to_platform(return_url: str, answer: str, lang: str) -> HTMLResponse:
    # the browser carries the signed answer back to the platform (no script needed beyond the autosubmit)
    body = (f'<form method="post" action="{html(return_url)}" id="back">'
            f'<input type="hidden" name="JWT" value="{html(answer)}">'
            f'<button type="submit">{html(t("lti.dl.back", lang))}</button></form>'
            '<script>document.getElementById("back").submit()</script>')
    return _page(t("lti.dl.title", lang), body, lang=lang)


ROUTES = [
    Route("/lti/login", login, methods=["GET", "POST"]),
    Route("/lti/launch", launch, methods=["POST"]),
    Route("/lti/jwks", jwks, methods=["GET"]),
    Route("/lti/deep_link", deep_link, methods=["POST"]),
]
