"""The LTI 1.3 Advantage tool without Starlette or Streamlit: login initiation, the launch and its
id_token checks, the signed session the pages read, deep linking, grade passback (AGS) through the
database outbox, and the roster (NRPS) as the class list.

Tokens are signed and checked with PyJWT (RS256); the tool's keys live in the database (rotate_key),
the platform's are fetched from its JWKS (bounded, cached per process, fetched again for an unknown
kid). Every refusal is a `Refused` with a short reason; the routes turn it into a 400 page.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import storage
import storage.lti as store
from exercises.teacher.assignments import AssignmentError, clean_student_name

from . import db

_LOG = logging.getLogger(__name__)

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
AGS_ENDPOINT = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
INSTRUCTOR_ROLES = ("http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor",
                    "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant",
                    "http://purl.imsglobal.org/vocab/lis/v2/membership#Administrator")
LEARNER_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"

MAX_TOKEN = 16_384  # characters of an id_token
MAX_FIELD = 255  # characters of an id, a hint or a state
MAX_RESPONSE = 2 * 2**20  # bytes read from a platform (JWKS, token, one roster page)
MAX_ROSTER = 1000  # members taken from a course roster
MAX_ROSTER_PAGES = 20
HTTP_TIMEOUT_S = 5.0
JWKS_TTL_S = 300.0
JWKS_REFETCH_S = 10.0  # an unknown kid fetches the JWKS again, at most this often
LEEWAY_S = 30  # clock skew allowed on exp / iat
LOGIN_TTL = timedelta(minutes=10)  # from login initiation to launch
SESSION_TTL_S = 8 * 3600
SESSION_COOKIE = "lti_session"  # the launch's session, set by the launch's answer (HttpOnly, SameSite=Strict)
HANDOFF_TTL = timedelta(minutes=2)  # from a launch to the page that spends its one-time code
MAX_HANDOFF = 64  # characters of a one-time code
HANDOFF_PARAM = "lti_code"  # the query parameter that carries it
ALGORITHM = "RS256"


class Refused(Exception):
    """A login, launch or session the tool does not take (reason: a short English word for logs)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _engine():
    return db.engine()


# ---------------------------------------------------------------- the tool's keys


def rotate_key() -> str:
    """A new RSA key signs from now on; the one before it stays in the JWKS (platforms cache it). Its kid."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    kid = secrets.token_hex(8)
    with db.guarded():
        store.add_key(_engine(), kid, pem, _now())
    return kid


def _newest_keys(count: int) -> list[tuple[str, str]]:
    """(kid, private PEM) of the newest `count` keys, newest first; the first key made when there is none."""
    with db.guarded():
        keys = store.newest_keys(_engine(), count)
    if not keys:
        rotate_key()
        with db.guarded():
            keys = store.newest_keys(_engine(), count)
    return keys


def signing_key() -> tuple[str, str]:
    """(kid, private PEM) of the current key (made the first time one is needed)."""
    return _newest_keys(1)[0]


def jwks() -> dict[str, Any]:
    """The tool's public keys: the current and the previous one."""
    out = []
    for kid, pem in _newest_keys(2):
        public = _private_key(pem).public_key()
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(public))
        out.append({**jwk, "kid": kid, "alg": ALGORITHM, "use": "sig"})
    return {"keys": out}


@functools.lru_cache(maxsize=8)
def _private_key(pem: str) -> rsa.RSAPrivateKey:
    """A stored key, loaded once per process (loading checks the key: a tenth of a second)."""
    return serialization.load_pem_private_key(pem.encode(), password=None)


def _sign(claims: Mapping[str, Any]) -> str:
    kid, pem = signing_key()
    return jwt.encode(dict(claims), _private_key(pem), algorithm=ALGORITHM, headers={"kid": kid})


# ---------------------------------------------------------------- bounded HTTP to the platform


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args: Any) -> None:  # a redirect is an answer, never followed
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _http(url: str, data: bytes | None = None, headers: Mapping[str, str] | None = None,
          method: str | None = None) -> tuple[int, bytes, Mapping[str, str]]:
    """One request to a platform: http(s) only, no redirects, a timeout, at most MAX_RESPONSE bytes read."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise Refused("bad_url")
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}), method=method)
    try:
        with _OPENER.open(request, timeout=HTTP_TIMEOUT_S) as response:
            body = response.read(MAX_RESPONSE + 1)
            status, got = response.status, dict(response.headers)
    except urllib.error.HTTPError as err:
        body, status, got = err.read(MAX_RESPONSE + 1), err.code, dict(err.headers or {})
    if len(body) > MAX_RESPONSE:
        raise Refused("response_too_large")
    return status, body, got


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise Refused("bad_json") from None


_JWKS_LOCK = threading.Lock()
_JWKS: dict[str, tuple[float, dict[str, Any]]] = {}  # url → (fetched at, {kid: PyJWK})


def _platform_keys(url: str, fresh: bool = False) -> dict[str, Any]:
    with _JWKS_LOCK:
        cached = _JWKS.get(url)
    age = time.monotonic() - cached[0] if cached else None
    if cached and (age < JWKS_TTL_S and not fresh or age < JWKS_REFETCH_S):
        return cached[1]
    try:
        status, body, _ = _http(url, headers={"Accept": "application/json"})
    except (OSError, Refused):
        status, body = 0, b""
    if status != 200:
        if cached:
            return cached[1]
        raise Refused("jwks_unreachable")
    keys = {}
    for entry in (_json(body) or {}).get("keys", [])[:20]:
        try:
            key = jwt.PyJWK(entry, algorithm=ALGORITHM)
        except (jwt.PyJWKError, jwt.InvalidKeyError, TypeError, ValueError):
            continue
        if entry.get("kid"):
            keys[str(entry["kid"])] = key
    with _JWKS_LOCK:
        _JWKS[url] = (time.monotonic(), keys)
    return keys


def forget_platform_keys() -> None:
    with _JWKS_LOCK:
        _JWKS.clear()


# ---------------------------------------------------------------- login initiation


def _field(params: Mapping[str, Any], name: str, required: bool = True) -> str:
    value = str(params.get(name) or "")
    if len(value) > MAX_FIELD or (required and not value):
        raise Refused(f"bad_{name}")
    return value


@dataclass(frozen=True)
class Login:
    redirect: str  # the platform's authorization endpoint with the request
    state: str  # the value of the state cookie


def login(params: Mapping[str, Any], launch_url: str) -> Login:
    """Third-party initiated login: check the platform is registered, keep a nonce for its launch,
    and send the browser to the platform's authorization endpoint (an OIDC implicit flow)."""
    issuer = _field(params, "iss")
    login_hint = _field(params, "login_hint")
    client_id = _field(params, "client_id", required=False) or None
    with db.guarded():
        platform = store.platform(_engine(), issuer, client_id)
    if platform is None:
        raise Refused("unknown_platform")
    state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    now = _now()
    with db.guarded():
        store.issue_nonce(_engine(), nonce, state, platform.issuer, platform.client_id, now + LOGIN_TTL, now)
    query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
             "client_id": platform.client_id, "redirect_uri": launch_url, "login_hint": login_hint,
             "state": state, "nonce": nonce}
    hint = _field(params, "lti_message_hint", required=False)
    if hint:
        query["lti_message_hint"] = hint
    sep = "&" if "?" in platform.auth_login_url else "?"
    return Login(platform.auth_login_url + sep + urllib.parse.urlencode(query), state)


# ---------------------------------------------------------------- the launch


@dataclass(frozen=True)
class Launch:
    """A checked launch: who, from which course, as what, asking for what."""

    issuer: str
    client_id: str
    course: store.Course
    sub: str
    name: str
    instructor: bool
    message_type: str
    claims: dict[str, Any] = field(repr=False)

    @property
    def custom(self) -> dict[str, Any]:
        custom = self.claims.get(LTI + "custom")
        return custom if isinstance(custom, dict) else {}


def _audience(unverified: Mapping[str, Any]) -> str:
    aud = unverified.get("aud")
    if isinstance(aud, list):
        if len(aud) == 1:
            return str(aud[0])
        return str(unverified.get("azp") or "")  # several audiences: the authorised party is the client
    return str(aud or "")


def _is_instructor(roles: Any) -> bool:
    return isinstance(roles, list) and any(str(r) in INSTRUCTOR_ROLES for r in roles)


def verify(id_token: str, state: str, state_cookie: str | None) -> Launch:
    """Check a launch: the state is this browser's, the id_token is signed by the registered
    platform's key and is for this tool (iss, aud, exp, iat), its deployment is registered, and its
    nonce is one this tool issued and has not seen come back (spent here, once, in the database)."""
    if not id_token or len(id_token) > MAX_TOKEN or not state or len(state) > MAX_FIELD:
        raise Refused("bad_request")
    if not state_cookie or not hmac.compare_digest(state.encode(), state_cookie.encode()):
        raise Refused("state_mismatch")
    try:
        header = jwt.get_unverified_header(id_token)
        unverified = jwt.decode(id_token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise Refused("malformed_token") from None
    if header.get("alg") != ALGORITHM:
        raise Refused("bad_algorithm")
    issuer, client_id = str(unverified.get("iss") or ""), _audience(unverified)
    with db.guarded():
        platform = store.platform(_engine(), issuer, client_id) if issuer and client_id else None
    if platform is None:
        raise Refused("unknown_platform")  # a wrong iss or aud names no registration
    kid = str(header.get("kid") or "")
    key = _platform_keys(platform.jwks_url).get(kid) or _platform_keys(platform.jwks_url, fresh=True).get(kid)
    if key is None:
        raise Refused("unknown_kid")
    try:
        claims = jwt.decode(id_token, key, algorithms=[ALGORITHM], audience=platform.client_id, issuer=platform.issuer,
                            leeway=LEEWAY_S, options={"require": ["exp", "iat", "iss", "aud", "sub", "nonce"]})
    except jwt.ExpiredSignatureError:
        raise Refused("expired") from None
    except jwt.InvalidSignatureError:
        raise Refused("bad_signature") from None
    except jwt.InvalidAudienceError:
        raise Refused("wrong_aud") from None
    except jwt.InvalidIssuerError:
        raise Refused("wrong_iss") from None
    except jwt.PyJWTError:
        raise Refused("invalid_token") from None
    if isinstance(claims["aud"], list) and len(claims["aud"]) > 1 and claims.get("azp") != platform.client_id:
        raise Refused("wrong_azp")
    if claims.get(LTI + "version") != "1.3.0":
        raise Refused("bad_version")
    deployment = str(claims.get(LTI + "deployment_id") or "")
    if deployment not in platform.deployments:
        raise Refused("unknown_deployment")
    context = claims.get(LTI + "context")
    context_id = str(context.get("id") or "") if isinstance(context, dict) else ""
    sub = str(claims.get("sub") or "")
    if not context_id or len(context_id) > MAX_FIELD or not sub or len(sub) > MAX_FIELD:
        raise Refused("no_course")
    message_type = str(claims.get(LTI + "message_type") or "")
    if message_type not in ("LtiResourceLinkRequest", "LtiDeepLinkingRequest"):
        raise Refused("bad_message_type")
    with db.guarded():
        if not store.spend_nonce(_engine(), str(claims["nonce"])[:MAX_FIELD], state, platform.issuer,
                                 platform.client_id, _now()):
            raise Refused("nonce_replayed")
    return Launch(platform.issuer, platform.client_id, store.Course(platform.issuer, deployment, context_id), sub,
                  _display_name(claims), _is_instructor(claims.get(LTI + "roles")), message_type, claims)


def _display_name(claims: Mapping[str, Any]) -> str:
    for text in (claims.get("name"), " ".join(str(claims.get(k) or "") for k in ("given_name", "family_name"))):
        try:
            return clean_student_name(str(text or "")[:70])
        except AssignmentError:
            continue
    return "Student"


# ---------------------------------------------------------------- the signed session the pages read


def _mac_key() -> bytes:
    with db.guarded():
        return hmac.new(storage.server_secret(_engine()), b"lti-session", hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Session:
    """What a launch let this browser do: a learner's name on one assignment, or an instructor's course."""

    role: str  # "learner" or "instructor"
    code: str | None  # the assignment launched (None: a deep-linking instructor)
    person: str  # the person digest ("lti:…" is what submissions file under)
    name: str  # the label (a learner's student name)
    course: store.Course
    client_id: str
    deep_link: dict[str, Any] | None = None  # {return_url, data} while an instructor picks a link
    expires: float = 0.0


def seal_session(session: Session) -> str:
    payload = {"r": session.role, "a": session.code, "p": session.person, "n": session.name,
               "c": [session.course.issuer, session.course.deployment, session.course.context],
               "k": session.client_id, "d": session.deep_link, "x": int(time.time() + SESSION_TTL_S)}
    body = _b64(json.dumps(payload, separators=(",", ":")).encode())
    return body + "." + _b64(hmac.new(_mac_key(), body.encode(), hashlib.sha256).digest())


def read_session(token: Any) -> Session | None:
    """The session a launch handed this browser, or None (forged, altered, expired, malformed)."""
    text = str(token or "")
    if not text or len(text) > 4096 or text.count(".") != 1:
        return None
    body, mac = text.split(".")
    try:
        good = hmac.compare_digest(_unb64(mac), hmac.new(_mac_key(), body.encode(), hashlib.sha256).digest())
        payload = json.loads(_unb64(body)) if good else None
    except (ValueError, TypeError, db.Unavailable):
        return None
    if not isinstance(payload, dict) or payload.get("x", 0) < time.time():
        return None
    issuer, deployment, context = payload["c"]
    return Session(payload["r"], payload.get("a"), payload["p"], payload["n"],
                   store.Course(issuer, deployment, context), payload["k"], payload.get("d"), payload["x"])


def learner_name(token: Any, code: str) -> tuple[str, str] | None:
    """(student name, person) when the session is a learner's launch of this very assignment."""
    session = read_session(token)
    if session is None or session.role != "learner" or session.code != code:
        return None
    return session.name, "lti:" + session.person


def teacher_key(token: Any, code: str) -> str | None:
    """The teacher key of `code` for an instructor of the course that owns it (None for anyone else):
    instructors open the gradebook and dashboard without typing a key."""
    session = read_session(token)
    if session is None or session.role != "instructor":
        return None
    with db.guarded():
        link = store.linked(_engine(), code)
    if link is None or link.course != session.course:
        return None
    return _unseal(link.sealed_key)


# ---------------------------------------------------------------- teacher keys sealed at rest


def _aead() -> AESGCM:
    with db.guarded():
        return AESGCM(hmac.new(storage.server_secret(_engine()), b"lti-teacher-key", hashlib.sha256).digest())


def _seal(text: str) -> str:
    nonce = secrets.token_bytes(12)
    return _b64(nonce + _aead().encrypt(nonce, text.encode(), b"teacher-key"))


def _unseal(sealed: str) -> str | None:
    raw = _unb64(sealed)
    try:
        return _aead().decrypt(raw[:12], raw[12:], b"teacher-key").decode()
    except Exception:  # noqa: BLE001  (cryptography's InvalidTag: another server secret)
        return None


# ---------------------------------------------------------------- what a launch leads to


@dataclass(frozen=True)
class Landing:
    """Where the browser goes after a launch: a page path with its query (a one-time code for the
    session, never the session), or the deep-linking form; the session the launch opened."""

    path: str
    query: dict[str, str]
    session: str


def _handed(path: str, query: dict[str, str], session: str) -> Landing:
    """The landing on a page: its address carries a one-time code the page spends for the session
    (an iframe's page may not get the launch's cookie); a copy of the address opens nothing."""
    code = secrets.token_urlsafe(24)
    now = _now()
    with db.guarded():
        store.hand_off(_engine(), code, session, now + HANDOFF_TTL, now)
    return Landing(path, {**query, HANDOFF_PARAM: code}, session)


def take_handoff(code: Any) -> str | None:
    """The session a launch handed to the page presenting `code`, once and within HANDOFF_TTL."""
    text = str(code or "")
    if not text or len(text) > MAX_HANDOFF:
        return None
    with db.guarded():
        return store.take_handoff(_engine(), text, _now())


def land(launch: Launch) -> Landing:
    """A learner opens their assignment as their course's person; an instructor its gradebook (the
    roster synced first) or, in the "add an activity" flow, the deep-linking builder."""
    now = _now()
    with db.guarded():
        label = store.remember_person(_engine(), launch.course, launch.sub, launch.name, now)
    person = store.person_id(launch.course, launch.sub)
    if launch.message_type == "LtiDeepLinkingRequest":
        if not launch.instructor:
            raise Refused("not_instructor")
        settings = launch.claims.get(DL + "deep_linking_settings")
        if not isinstance(settings, dict) or not str(settings.get("deep_link_return_url") or ""):
            raise Refused("no_return_url")
        deep_link = {"return_url": str(settings["deep_link_return_url"])[:500],
                     "data": str(settings.get("data") or "")[:1000] or None,
                     "lang": str(launch.claims.get("locale") or "")[:10]}
        token = seal_session(Session("instructor", None, person, label, launch.course, launch.client_id, deep_link))
        return Landing("/lti/deep_link", {}, token)
    code = str(launch.custom.get("assignment") or "")[:16]
    with db.guarded():
        link = store.linked(_engine(), code) if code else None
    if link is None:
        raise Refused("no_assignment")
    if link.course != launch.course or link.client_id != launch.client_id:
        raise Refused("other_course")  # a link copied into another course reaches nothing
    endpoint = launch.claims.get(AGS_ENDPOINT)
    lineitem = str(endpoint.get("lineitem") or "") if isinstance(endpoint, dict) else ""
    if lineitem and len(lineitem) <= 500:
        with db.guarded():
            store.set_lineitem(_engine(), code, lineitem)
    if launch.instructor:  # the roster is read off the launch: a slow LMS never holds the instructor up
        threading.Thread(target=_sync_quietly, args=(launch, code), name="lti-roster", daemon=True).start()
        token = seal_session(Session("instructor", code, person, label, launch.course, launch.client_id))
        return _handed("/gradebook", {"code": code}, token)
    with db.guarded():
        store.set_class_list(_engine(), code, [label], now)  # the platform vouches for its learner
    token = seal_session(Session("learner", code, person, label, launch.course, launch.client_id))
    drain_soon()
    return _handed("/assignments", {"assignment": code}, token)


# ---------------------------------------------------------------- deep linking


def deep_linking(token: Any) -> Session:
    """The instructor's session of an "add an activity" flow; Refused for any other session."""
    session = read_session(token)
    if session is None or session.role != "instructor" or not session.deep_link:
        raise Refused("not_deep_linking")
    return session


def deep_link_response(session: Session, created: storage.Created) -> tuple[str, str]:
    """Link the assignment the instructor just built (services.assignments.create), or picked with its
    teacher key, to their course, and
    sign the LtiDeepLinkingResponse that hands its resource link to the platform: (the platform's return
    URL, the JWT to post there)."""
    if session.role != "instructor" or not session.deep_link:
        raise Refused("not_deep_linking")
    code = created.assignment.code
    with db.guarded():
        mine = store.link_assignment(_engine(), code, session.client_id, session.course,
                                     _seal(created.teacher_key or ""), _now())
    if not mine:
        raise Refused("linked_elsewhere")
    item = {"type": "ltiResourceLink", "title": created.assignment.title, "custom": {"assignment": code},
            "lineItem": {"scoreMaximum": 100, "label": created.assignment.title, "resourceId": code}}
    now = int(time.time())
    claims = {"iss": session.client_id, "aud": [session.course.issuer], "iat": now, "exp": now + 600,
              "nonce": secrets.token_urlsafe(16), LTI + "deployment_id": session.course.deployment,
              LTI + "message_type": "LtiDeepLinkingResponse", LTI + "version": "1.3.0",
              DL + "content_items": [item]}
    if session.deep_link.get("data"):
        claims[DL + "data"] = session.deep_link["data"]
    return session.deep_link["return_url"], _sign(claims)


# ---------------------------------------------------------------- service calls (AGS, NRPS)

_TOKENS_LOCK = threading.Lock()
_TOKENS: dict[tuple[str, str, str], tuple[float, str]] = {}


def _access_token(platform: store.Platform, scope: str) -> str:
    """An OAuth 2 access token for `scope`, by a client assertion signed with the tool's key (cached)."""
    key = (platform.issuer, platform.client_id, scope)
    with _TOKENS_LOCK:
        cached = _TOKENS.get(key)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    now = int(time.time())
    assertion = _sign({"iss": platform.client_id, "sub": platform.client_id, "aud": platform.token_url,
                       "iat": now, "exp": now + 300, "jti": uuid.uuid4().hex})
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": scope,
                                   "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                                   "client_assertion": assertion}).encode()
    status, body, _ = _http(platform.token_url, form, {"Content-Type": "application/x-www-form-urlencoded"})
    if status != 200:
        raise Refused(f"token_status_{status}")
    got = _json(body)
    token = str(got.get("access_token") or "") if isinstance(got, dict) else ""
    if not token:
        raise Refused("no_access_token")
    life = max(0.0, float(got.get("expires_in") or 3600) - 30.0)
    with _TOKENS_LOCK:
        _TOKENS[key] = (time.monotonic() + life, token)
    return token


def _platform_of(issuer: str, client_id: str) -> store.Platform:
    with db.guarded():
        platform = store.platform(_engine(), issuer, client_id)
    if platform is None:
        raise Refused("unknown_platform")
    return platform


def sync_roster(launch: Launch, code: str) -> int:
    """The course's learners (NRPS) become the assignment's class list; how many were added."""
    service = launch.claims.get(NRPS_CLAIM)
    url = str(service.get("context_memberships_url") or "") if isinstance(service, dict) else ""
    if not url:
        return 0
    token = _access_token(_platform_of(launch.issuer, launch.client_id), NRPS_SCOPE)
    labels: list[str] = []
    for _ in range(MAX_ROSTER_PAGES):
        status, body, headers = _http(url, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"})
        if status != 200:
            raise Refused(f"roster_status_{status}")
        members = (_json(body) or {}).get("members") or []
        now = _now()
        for member in members[:MAX_ROSTER - len(labels)]:
            if not isinstance(member, dict) or member.get("status", "Active") != "Active":
                continue
            if LEARNER_ROLE not in (member.get("roles") or []) or not member.get("user_id"):
                continue
            name = _display_name(member)
            with db.guarded():
                labels.append(store.remember_person(_engine(), launch.course, str(member["user_id"])[:MAX_FIELD],
                                                    name, now))
        url = _next_link(headers)
        if not url or len(labels) >= MAX_ROSTER:
            break
    with db.guarded():
        return store.set_class_list(_engine(), code, labels, _now())


def _sync_quietly(launch: Launch, code: str) -> None:
    try:
        sync_roster(launch, code)
    except (Refused, OSError, ValueError, db.Unavailable) as err:
        _LOG.warning("the course roster could not be read: %s", err)


def _next_link(headers: Mapping[str, str]) -> str | None:
    for part in str({k.lower(): v for k, v in headers.items()}.get("link", "")).split(","):
        if 'rel="next"' in part and "<" in part and ">" in part:
            return part[part.index("<") + 1:part.index(">")]
    return None


def _scores_url(lineitem: str) -> str:
    parts = urllib.parse.urlsplit(lineitem)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


# ---------------------------------------------------------------- grade passback through the outbox


def launched(person: str | None) -> bool:
    """Is this submitter a learner a platform launched (their scores go back to it)?"""
    return bool(person) and person.startswith("lti:")


def queue(code: str, person: str, score: float) -> None:
    """A launched learner's new counting score (0..1): queued for the course's line item, posted soon."""
    with db.guarded():
        if not launched(person) or store.linked(_engine(), code) is None:
            return
        store.queue_score(_engine(), code, person[4:], round(score, 6), _now())
    drain_soon()


WORKER = uuid.uuid4().hex  # this process, as it claims outbox rows


def post_score(claim: store.Claimed) -> None:
    """POST one score to its line item (AGS). Refused or OSError when the platform did not take it."""
    with db.guarded():
        engine = _engine()
        link = store.linked(engine, claim.code)
        sub = store.sub_of(engine, claim.person)
    if link is None or not link.lineitem or sub is None:
        raise Refused("no_lineitem")
    platform = _platform_of(link.course.issuer, link.client_id)
    token = _access_token(platform, SCORE_SCOPE)
    body = {"userId": sub, "scoreGiven": round(claim.score * 100, 4), "scoreMaximum": 100,
            "activityProgress": "Completed", "gradingProgress": "FullyGraded",
            "timestamp": claim.scored_at.replace(tzinfo=UTC).isoformat()}
    status, _, _ = _http(_scores_url(link.lineitem), json.dumps(body).encode(),
                         {"Authorization": f"Bearer {token}", "Content-Type": "application/vnd.ims.lis.v1.score+json"})
    if status not in (200, 201, 202, 204):
        raise Refused(f"score_status_{status}")


def drain(limit: int = 50) -> int:
    """Post every due score this process can claim; how many were posted. A failure waits and is retried."""
    sent = 0
    with db.guarded():
        pending = store.due(_engine(), _now(), limit)
    for code, person in pending:
        with db.guarded():
            claim = store.claim_score(_engine(), code, person, WORKER, _now())
        if claim is None:
            continue  # another replica has it
        try:
            post_score(claim)
        except (Refused, OSError, ValueError) as err:
            with db.guarded():
                store.post_failed(_engine(), claim, WORKER, str(err), _now())
            continue
        with db.guarded():
            store.posted(_engine(), claim, WORKER)
        sent += 1
    return sent


_WAKE = threading.Event()
_STARTED = threading.Lock()
_poster: threading.Thread | None = None
POLL_S = 30.0  # a failed post is looked at again at least this often


def _post_forever() -> None:
    while True:
        _WAKE.wait(POLL_S)
        _WAKE.clear()
        try:
            drain()
        except Exception:  # noqa: BLE001  (a database or platform outage: the next wake tries again)
            _LOG.exception("grade passback failed; it is retried")


def drain_soon() -> None:
    """Wake this process's poster (started the first time): the score goes out off the page's run."""
    global _poster
    with _STARTED:
        if _poster is None:
            _poster = threading.Thread(target=_post_forever, name="lti-passback", daemon=True)
            _poster.start()
    _WAKE.set()


def register(issuer: str, client_id: str, auth_login_url: str, token_url: str, jwks_url: str,
             deployments: list[str]) -> None:
    """Register (or update) a platform: what its administrator gives the tool (deploy/README.md)."""
    for url in (auth_login_url, token_url, jwks_url):
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) address: {url[:100]}")
    if not issuer or not client_id or not deployments:
        raise ValueError("an issuer, a client id and at least one deployment id are needed")
    with db.guarded():
        store.register_platform(_engine(), store.Platform(issuer[:255], client_id[:255], auth_login_url,
                                                          token_url, jwks_url, tuple(d[:255] for d in deployments)),
                                _now())
