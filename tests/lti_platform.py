"""A small LMS for the LTI tests: its own RSA key and JWKS, signed id_tokens for launches, an OAuth 2
token endpoint that checks the tool's signed client assertion against the tool's JWKS, an AGS score
endpoint per line item, and an NRPS roster. `failing = True` makes its score endpoint answer 503.

    platform = Platform(tool_jwks=lambda: ...).start()
    platform.registration()            # what the tool registers (issuer, client id, URLs, deployment)
    platform.id_token(nonce, sub="s1", roles=[LEARNER], custom={"assignment": code})
    platform.scores                    # [(lineitem, body)] posted by the tool
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
DEPLOYMENT = "deployment-1"
CLIENT_ID = "attention-tool"


def new_key() -> tuple[str, Any]:
    return secrets.token_hex(4), rsa.generate_private_key(public_exponent=65537, key_size=2048)


@functools.cache
def shared_key() -> tuple[str, Any]:
    """One platform key for every simulated platform of a test run (an RSA key takes a moment to make)."""
    return new_key()


class Platform:
    def __init__(self, tool_jwks: Callable[[], dict[str, Any]]):
        self.tool_jwks = tool_jwks
        self.kid, self.key = shared_key()
        self.failing = False
        self.scores: list[tuple[str, dict[str, Any]]] = []
        self.members: list[dict[str, Any]] = []
        self.assertions: list[dict[str, Any]] = []  # the tool's client assertions, checked
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------ serving

    def start(self) -> Platform:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: Any = None, content_type: str = "application/json") -> None:
                body = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                path = urllib.parse.urlsplit(self.path).path
                if path == "/jwks":
                    self._send(200, platform.jwks())
                elif path == "/memberships":
                    if not platform._authorised(self.headers.get("Authorization")):
                        self._send(401)
                        return
                    self._send(200, {"id": "m", "context": {"id": "course-A"}, "members": platform.members})
                else:
                    self._send(404)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                path = urllib.parse.urlsplit(self.path).path
                if path == "/token":
                    self._send(*platform._token(urllib.parse.parse_qs(body.decode())))
                elif path.endswith("/scores"):
                    if platform.failing:
                        self._send(503)
                        return
                    if not platform._authorised(self.headers.get("Authorization")):
                        self._send(401)
                        return
                    with platform._lock:
                        platform.scores.append((platform.url + path[: -len("/scores")], json.loads(body)))
                    self._send(200, {})
                else:
                    self._send(404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    # ------------------------------------------------------------ the platform's side of the protocol

    def registration(self) -> dict[str, Any]:
        return {"issuer": self.url, "client_id": CLIENT_ID, "auth_login_url": self.url + "/auth",
                "token_url": self.url + "/token", "jwks_url": self.url + "/jwks", "deployments": [DEPLOYMENT]}

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def lineitem(self, name: str = "1") -> str:
        return f"{self.url}/lineitems/{name}"

    def id_token(self, nonce: str, sub: str = "student-1", roles: tuple[str, ...] = (LEARNER,),
                 custom: dict[str, Any] | None = None, context: str = "course-A", lineitem: str | None = None,
                 message_type: str = "LtiResourceLinkRequest", key: Any = None, kid: str | None = None,
                 **overrides: Any) -> str:
        """A launch's id_token signed with the platform's key (or `key`/`kid` to test refusals);
        `overrides` replace any claim (iss, aud, exp …)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.url, "aud": CLIENT_ID, "sub": sub, "iat": now, "exp": now + 300, "nonce": nonce,
            "name": f"Learner {sub}", LTI + "deployment_id": DEPLOYMENT, LTI + "version": "1.3.0",
            LTI + "message_type": message_type, LTI + "roles": list(roles),
            LTI + "context": {"id": context, "title": context},
            LTI + "resource_link": {"id": f"link-{context}"}, LTI + "custom": custom or {},
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
                "scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/score"],
                "lineitem": lineitem or self.lineitem()},
            "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                "context_memberships_url": self.url + "/memberships"},
        }
        if message_type == "LtiDeepLinkingRequest":
            claims["https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"] = {
                "deep_link_return_url": self.url + "/deep_link_return", "accept_types": ["ltiResourceLink"],
                "data": "opaque-42"}
        claims.update(overrides)
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def read_deep_link(self, token: str) -> dict[str, Any]:
        """The tool's LtiDeepLinkingResponse, its signature checked against the tool's JWKS."""
        return self._tool_claims(token, audience=self.url)

    def _tool_claims(self, token: str, audience: str) -> dict[str, Any]:
        kid = jwt.get_unverified_header(token)["kid"]
        keys = {k["kid"]: jwt.PyJWK(k) for k in self.tool_jwks()["keys"]}
        return jwt.decode(token, keys[kid], algorithms=["RS256"], audience=audience)

    def _token(self, form: dict[str, list[str]]) -> tuple[int, Any]:
        try:
            claims = self._tool_claims(form["client_assertion"][0], audience=self.url + "/token")
        except (KeyError, jwt.PyJWTError):
            return 401, {"error": "invalid_client"}
        if claims.get("iss") != CLIENT_ID or claims.get("sub") != CLIENT_ID:
            return 401, {"error": "invalid_client"}
        with self._lock:
            self.assertions.append(claims)
        return 200, {"access_token": "tok-" + secrets.token_hex(8), "token_type": "bearer", "expires_in": 3600,
                     "scope": form.get("scope", [""])[0]}

    @staticmethod
    def _authorised(header: str | None) -> bool:
        return bool(header and header.startswith("Bearer tok-"))
