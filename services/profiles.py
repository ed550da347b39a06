"""A learner's private profile without Streamlit.

    opened = profiles.open_browser(cookie)     # the browser's own profile; a new one when the cookie is
                                               # missing, forged or unknown (opened.notice says which)
    profiles.open_login(issuer, subject)       # a signed-in user (st.login) is the profile
    code = profiles.new_recovery_code(profile) # shown once; opens the same profile in another browser
    profiles.open_with_code(code)              # a new browser secret for that profile, or None
    profiles.export(profile)                   # everything stored, as plain JSON
    profiles.delete(profile)                   # all of it gone
    profiles.cookie_for(cookie, browser)       # the secret the server puts in a browser's cookie on a page load
    profiles.hand_off(profile, browser)        # ...a new one of `profile` at that browser's next page load

The browser's secret is 256 random bits (URL-safe base64), the recovery code 100 bits in Crockford's
base32 (read aloud and typed without confusing O with 0 or I with 1); both are stored as their SHA-256
only. A profile's id is random too, and neither is ever put in a URL.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import storage
from storage import profiles as store

from . import db, review

COOKIE = "attention_profile"  # the cookie a browser keeps its secret in
BROWSER_COOKIE = "attention_browser"  # this browser's own random id (what its profile secrets are issued to)
COOKIE_DAYS = 400  # browsers cap a cookie's life at 400 days
HOST_PREFIX = "__Host-"  # over TLS: Secure, Path=/, no Domain, so no sibling site can set the cookie
SECRET_BYTES = 32
_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")  # token_urlsafe(32)
CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32
CODE_LENGTH = 20  # 100 bits
_CODE_READS = str.maketrans({"O": "0", "I": "1", "L": "1"})


@dataclass(frozen=True)
class Opened:
    """The profile a browser works under, and the secret it must keep in its cookie."""

    profile: str
    secret: str | None  # None for a signed-in user (no cookie needed)
    fresh: bool  # a new, empty profile
    notice: str | None = None  # "unknown_id": the browser's cookie opened nothing, so it got a new profile
    browser: str | None = None  # this browser's own id, to keep in its cookie (None: signed in)
    confirmed: bool = True  # False: the secret was issued to another browser (a planted cookie?): ask first


class NotConfirmed(PermissionError):
    """The profile was opened with a cookie this browser did not create: nothing is filed in it until
    the user confirms it is theirs (confirm())."""


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def well_formed_secret(text: Any) -> bool:
    return isinstance(text, str) and _SECRET.fullmatch(text) is not None


def browser_digest(browser: str) -> str:
    return hashlib.sha256(b"browser\x1f" + browser.encode()).hexdigest()


def cookie_name(name: str, tls: bool) -> str:
    """The name a cookie goes by: `__Host-` prefixed when the request came over TLS."""
    return HOST_PREFIX + name if tls else name


def cookie_for(secret: Any, browser: str) -> str:
    """The browser secret the server gives a browser on a page load (its cookie): a new secret of the
    profile waiting for this browser (hand_off), else the one it sent, else the secret of a fresh
    profile issued to it. Whether a sent secret opens anything is the page's question (open_browser).
    db.Unavailable on a failure."""
    with db.guarded():
        engine = db.engine()
        fresh = new_secret()
        if store.take_handoff(engine, browser_digest(browser), fresh) is not None:
            return fresh
        if well_formed_secret(secret):
            return str(secret)
        store.create_profile(engine, "browser", fresh, "browser", browser=browser_digest(browser))
    return fresh


def hand_off(profile: str, browser: str) -> None:
    """The browser `browser` takes `profile` at its next page load (the server sets its cookie then: no
    script on a page ever sees the secret). db.Unavailable on a failure."""
    with db.guarded():
        store.add_handoff(db.engine(), profile, browser_digest(browser))


def open_browser(secret: Any, browser: Any = None) -> Opened:
    """The profile of the browser whose cookie holds `secret`: its own when the secret is known, else a
    fresh empty one with a new secret (and notice "unknown_id" when a secret was there but opened
    nothing: forged, from a deleted profile, or from another server). `browser`: this browser's own id
    (its other cookie; a new one is made when missing). A secret issued to another browser opens the
    profile unconfirmed: nothing is filed in it until the user confirms (a cookie planted by someone
    else must not collect this browser's attempts). db.Unavailable on a failure."""
    own = browser if well_formed_secret(browser) else new_secret()
    with db.guarded():
        engine = db.engine()
        if well_formed_secret(secret):
            found = store.browser_of(engine, secret)
            if found is not None:
                profile, issued_to = found
                if issued_to is None:  # issued before browsers were kept: it belongs to the first to show it
                    store.bind_browser(engine, secret, browser_digest(own))
                confirmed = issued_to is None or issued_to == browser_digest(own)
                return Opened(profile, secret, fresh=False, browser=own, confirmed=confirmed)
        fresh = new_secret()
        profile = store.create_profile(engine, "browser", fresh, "browser", browser=browser_digest(own))
    notice = None if secret in (None, "") else "unknown_id"
    return Opened(profile, fresh, fresh=True, notice=notice, browser=own)


def confirm(secret: str, browser: str) -> bool:
    """The user says the profile this browser's cookie opens is theirs: its attempts are filed there
    from now on. False when the secret opens nothing (any more)."""
    if not (well_formed_secret(secret) and well_formed_secret(browser)):
        return False
    with db.guarded():
        return store.bind_browser(db.engine(), secret, browser_digest(browser))


def may_file(profile: str, secret: str | None, browser: str | None) -> bool:
    """May this browser's attempts be filed in `profile`: its secret still opens it and was issued to
    this browser (or confirmed by its user). A signed-in user (no secret) always may."""
    if secret is None:
        return True
    if not (well_formed_secret(secret) and well_formed_secret(browser)):
        return False
    with db.guarded():
        found = store.browser_of(db.engine(), secret)
    return found is not None and found[0] == profile and found[1] == browser_digest(str(browser))


def still_open(profile: str, secret: str | None) -> bool:
    """Does the browser secret still open the profile (not signed out by a new recovery code, or by
    "sign out other browsers")? A signed-in user's session (no secret) always does."""
    if secret is None:
        return True
    with db.guarded():
        found = store.browser_of(db.engine(), secret)
    return found is not None and found[0] == profile


def sign_out_others(profile: str, keep: str) -> int:
    """Every other browser of the profile stops opening it (their cookies open nothing any more, and
    their open pages lose it at their next run); `keep` is this browser's secret. The number signed out."""
    with db.guarded():
        return store.sign_out_browsers(db.engine(), profile, keep)


def unsaved_profile_id() -> str:
    """A profile id for a session whose profile could not be stored (the database is down): nothing is
    kept under it, and it opens no one's data."""
    return store.new_profile_id()


def login_profile_id(issuer: Any, subject: Any) -> str:
    """The profile id of a signed-in user: derived from the identity provider and the user's subject."""
    digest = hashlib.sha256(f"{issuer or ''}\n{subject}".encode()).hexdigest()[:32]
    return "u-" + digest


def open_login(issuer: Any, subject: Any) -> Opened:
    """The signed-in user's profile (st.login with OIDC): the user is the profile, on every browser."""
    if not str(subject or "").strip():
        raise ValueError("a signed-in user has a subject")
    profile = login_profile_id(issuer, subject)
    with db.guarded():
        store.ensure_profile(db.engine(), profile, "login")
    return Opened(profile, None, fresh=False)


def new_recovery_code(profile: str, keep: str | None = None) -> str:
    """A recovery code for `profile`, shown once: it replaces any earlier code of the profile, and every
    browser but this one (its secret `keep`) is signed out (someone who opened it with the old code
    keeps no access)."""
    raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    with db.guarded():
        store.add_secret(db.engine(), profile, raw, "recovery", replace=True, keep_browser=keep)
    return format_code(raw)


def format_code(raw: str) -> str:
    return "-".join(raw[i:i + 4] for i in range(0, len(raw), 4))


def clean_code(text: Any) -> str | None:
    """A recovery code as typed (any case, spaces or dashes, O for 0, I or L for 1) in its stored form,
    or None when it cannot be one."""
    raw = re.sub(r"[\s-]+", "", str(text or "")).upper().translate(_CODE_READS)
    if len(raw) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in raw):
        return None
    return raw


def has_recovery_code(profile: str) -> bool:
    with db.guarded():
        return store.has_secret(db.engine(), profile, "recovery")


def open_with_code(code: Any, browser: Any = None) -> Opened | None:
    """The profile a recovery code opens, with a new browser secret linked to it and issued to this
    browser (`browser`, its own id: the browser that typed the code keeps that profile from now on);
    None for a malformed, forged or unknown code."""
    raw = clean_code(code)
    if raw is None:
        return None
    own = browser if well_formed_secret(browser) else new_secret()
    with db.guarded():
        engine = db.engine()
        found = store.profile_for_secret(engine, raw, "recovery")
        if found is None:
            return None
        secret = new_secret()
        store.add_secret(engine, found, secret, "browser", browser=browser_digest(own))
    return Opened(found, secret, fresh=False, browser=own)


def export(profile: str, now: datetime | None = None) -> dict[str, Any]:
    """Everything stored for a profile, as plain JSON: the attempts and the review schedule made of them."""
    now = now or datetime.now(UTC)
    with db.guarded():
        rows = storage.list_attempts(db.engine(), profile)
    cards = review.cards(rows)
    return {
        "format": "attention-by-hand profile export, version 1",
        "exported_at": now.isoformat(),
        "attempts": [{"kind": a.kind, "level": a.level, "seed": a.seed, "score": a.score,
                      "misconception": a.misconception, "hints_used": a.hints_used, "seconds": a.seconds,
                      "solution_shown": a.solution_shown, "at": a.at.isoformat(), "version": a.version,
                      "exercise": a.exercise} for a in rows],
        "reviews": [{"kind": kind, "level": level, **card.export(now)} for (kind, level), card in cards.items()],
    }


def delete(profile: str) -> int:
    """Delete the profile and every attempt stored under it; the number of attempts deleted."""
    with db.guarded():
        return store.delete_profile(db.engine(), profile)


# ---------------------------------------------------------------- the operator's command line


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m services.profiles legacy` lists the profile names kept from before profiles were private;
    `python -m services.profiles claim NAME` prints a recovery code that opens one in a browser."""
    parser = argparse.ArgumentParser(prog="python -m services.profiles", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("legacy", help="list the legacy profile names and their attempts")
    claim = sub.add_parser("claim", help="print a recovery code for a legacy profile name")
    claim.add_argument("name")
    args = parser.parse_args(argv)
    legacy = store.legacy_profiles(db.engine())
    if args.command == "legacy":
        for name, count in legacy.items():
            print(f"{count:6d}  {name}")
        return 0
    name = " ".join(args.name.split())
    if name not in legacy:
        print(f"no legacy profile named {name!r}", file=sys.stderr)
        return 1
    print(new_recovery_code(name))
    return 0


__all__ = ["BROWSER_COOKIE", "COOKIE", "COOKIE_DAYS", "HOST_PREFIX", "NotConfirmed", "Opened", "clean_code", "confirm",
           "cookie_for", "cookie_name", "delete", "export", "format_code", "hand_off", "has_recovery_code",
           "login_profile_id", "may_file", "new_recovery_code", "new_secret", "open_browser", "open_login",
           "open_with_code", "sign_out_others", "still_open", "unsaved_profile_id", "well_formed_secret"]

if __name__ == "__main__":
    raise SystemExit(main())
