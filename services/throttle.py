"""Throttling of guesses: every form that accepts a secret (teacher keys, share codes, recovery codes,
personal-link tokens), per client address and with a global budget per form, counted in the database
so that a new websocket, another tab or another replica meets the same wait (`Shared`,
`client_address`). The per-session record below keeps the same policy in a plain dict.

The first FREE wrong tries cost nothing; after that each further wrong try must wait longer before
the next one is taken: BASE seconds, then twice that, … up to CAP. A right try clears the record.
The record is a plain dict the caller keeps (Streamlit's session state), so this module knows
nothing of Streamlit; the clock is injected for tests. Verification itself is unchanged and stays
constant-time (scrypt and hmac.compare_digest in storage): the throttle only decides whether a try
is taken at all.

    gate = Throttle()
    wait = gate.remaining(record)          # > 0: refuse this try, say how long to wait
    gate.failed(record, attempt=code)      # after a wrong key or an unknown code
    gate.succeeded(record)                 # after a right one
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import os
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import storage.throttles as store

from . import db

FREE = 3  # wrong tries before any wait
BASE_S = 2.0  # the first wait
CAP_S = 300.0  # the longest wait


@dataclass
class Throttle:
    free: int = FREE
    base: float = BASE_S
    cap: float = CAP_S
    clock: Callable[[], float] = field(default=time.monotonic)

    def delay(self, failures: int) -> float:
        """The wait after `failures` wrong tries in a row: 0, …, 0, base, 2·base, 4·base, … ≤ cap."""
        over = failures - self.free - 1
        if over < 0:
            return 0.0
        return min(self.cap, self.base * 2.0 ** min(over, 62))

    def remaining(self, record: MutableMapping[str, Any]) -> float:
        """Seconds to wait before the next try is taken (0: go ahead)."""
        return max(0.0, float(record.get("until", 0.0)) - self.clock())

    def remaining_text(self, record: MutableMapping[str, Any]) -> int:
        """The wait in whole seconds, rounded up (for the message)."""
        return max(1, math.ceil(self.remaining(record)))

    def failed(self, record: MutableMapping[str, Any], attempt: str | None = None) -> float:
        """Count a wrong try and return the wait it sets. The same attempt as the last one counted
        (a page rerun showing the same unknown code again) is not counted twice."""
        if attempt is not None and record.get("last") == attempt:
            return self.remaining(record)
        failures = int(record.get("failures", 0)) + 1
        record["failures"] = failures
        record["last"] = attempt
        wait = self.delay(failures)
        record["until"] = self.clock() + wait
        return wait

    def succeeded(self, record: MutableMapping[str, Any]) -> None:
        record.clear()


GATE = Throttle()  # the pages' throttle: 3 free wrong tries, then 2 s, 4 s, 8 s … up to 5 minutes


def record_in(state: MutableMapping[str, Any], name: str) -> MutableMapping[str, Any]:
    """The throttle record `name` kept in `state` (a session's state), made empty the first time."""
    key = f"throttle.{name}"
    if not isinstance(state.get(key), dict):
        state[key] = {}
    return state[key]


# ---------------------------------------------------------------- shared by sessions and replicas

FORMS = ("gradebook", "assignments", "dashboard", "recovery", "personal_link", "lti")
GLOBAL_BUDGET = 120  # wrong tries at one form, from everyone, in a window: more make every source wait
WINDOW_S = 60.0
TRUSTED_ENV = "ATTENTION_TRUSTED_PROXIES"  # comma-separated addresses or networks of the proxies
DEFAULT_TRUSTED = "127.0.0.1/32,::1/128"  # nginx on the same machine (deploy/nginx.conf)


def _networks(text: str) -> list[Any]:
    out = []
    for part in text.split(","):
        try:
            out.append(ipaddress.ip_network(part.strip(), strict=False))
        except ValueError:
            continue
    return out


def _address(text: Any) -> Any:
    try:
        return ipaddress.ip_address(str(text or "").strip().strip("[]"))
    except ValueError:
        return None


def client_address(peer: str | None, headers: Mapping[str, str], trusted: str | None = None) -> str:
    """The address of the browser behind the proxy. `peer` is the connection's address (Streamlit's
    st.context.ip_address: None for localhost, where nginx runs); the forwarded headers are believed
    only from a trusted proxy: X-Real-IP, else the right-most X-Forwarded-For entry that is not a
    trusted proxy (the entries to its left are whatever the browser sent). "local" when none is known."""
    nets = _networks(os.environ.get(TRUSTED_ENV, "") or DEFAULT_TRUSTED if trusted is None else trusted)
    direct = _address(peer) if peer else _address("127.0.0.1")
    if direct is None:
        return "local"
    if not any(direct in n for n in nets if n.version == direct.version):
        return str(direct)
    lower = {k.lower(): v for k, v in headers.items()}
    for hop in reversed([h for h in str(lower.get("x-forwarded-for", "")).split(",") if h.strip()]):
        found = _address(hop)
        if found is None:
            break
        if not any(found in n for n in nets if n.version == found.version):
            return str(found)
    real = _address(lower.get("x-real-ip"))  # a proxy that sets only this one
    if real is not None:
        return str(real)
    return str(direct) if peer else "local"


def over_tls(peer: str | None, headers: Mapping[str, str], scheme: str = "http", trusted: str | None = None) -> bool:
    """Did the browser's request come over TLS: this connection's own scheme, or X-Forwarded-Proto
    "https" from a trusted proxy (the header is the browser's own word otherwise)."""
    if scheme in ("https", "wss"):
        return True
    nets = _networks(os.environ.get(TRUSTED_ENV, "") or DEFAULT_TRUSTED if trusted is None else trusted)
    direct = _address(peer) if peer else _address("127.0.0.1")
    if direct is None or not any(direct in n for n in nets if n.version == direct.version):
        return False
    lower = {k.lower(): v for k, v in headers.items()}
    return str(lower.get("x-forwarded-proto", "")).split(",")[-1].strip().lower() == "https"


def source_of(address: str) -> str:
    """The key a client address is counted under: a digest (no address is stored), an IPv6 address by
    its /64 (one household or host gets a whole /64 to pick from)."""
    found = _address(address)
    if found is not None and found.version == 6:
        address = str(ipaddress.ip_network(f"{found}/64", strict=False))
    return hashlib.sha256(b"throttle\x1f" + str(address).encode()).hexdigest()[:32]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass
class Shared:
    """The throttle of one form, counted in the database per client source and for everyone."""

    form: str
    policy: Throttle = field(default_factory=Throttle)
    budget: int = GLOBAL_BUDGET
    window: float = WINDOW_S

    def remaining(self, source: str) -> float:
        """Seconds before a try from `source` is taken (0: go ahead; also when the database is down,
        where no secret can be checked anyway)."""
        try:
            with db.guarded():
                return store.wait(db.engine(), self.form, source, _now())
        except db.Unavailable:
            return 0.0

    def remaining_text(self, source: str) -> int:
        return max(1, math.ceil(self.remaining(source)))

    def failed(self, source: str, attempt: str | None = None) -> float:
        """Count a wrong try (the same attempt as the source's last one is not counted twice)."""
        digest = None if attempt is None else hashlib.sha256(attempt.encode()).hexdigest()[:32]
        try:
            with db.guarded():
                return store.failed(db.engine(), self.form, source, digest, _now(), self.policy.delay,
                                    self.budget, self.window)
        except db.Unavailable:
            return 0.0

    def succeeded(self, source: str) -> None:
        try:
            with db.guarded():
                store.succeeded(db.engine(), self.form, source)
        except db.Unavailable:
            pass


SHARED = {form: Shared(form) for form in FORMS}
