"""Share codes and teacher keys: random (secrets), keys stored only as salted scrypt hashes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # no 0/O, 1/I/L: easy to read aloud and type
CODE_LENGTH = 8
_CODE = re.compile(f"^[{CODE_ALPHABET}]{{{CODE_LENGTH}}}$")
_KEY = re.compile(r"^[A-Za-z0-9_-]{20,64}$")
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1  # 16 MiB, ~50 ms per check


class MalformedCode(ValueError):
    """Text that cannot be an assignment code."""


class MalformedKey(ValueError):
    """Text that cannot be a teacher key."""


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def parse_code(text: object) -> str:
    """A code as typed ("k7qm x2pd", "K7QM-X2PD") in canonical form; MalformedCode otherwise."""
    code = re.sub(r"[\s-]", "", str(text or "")).upper()
    if not _CODE.match(code):
        raise MalformedCode(code[:40])
    return code


def new_key() -> str:
    """A teacher key: 144 random bits, URL-safe text. Shown once, never stored."""
    return secrets.token_urlsafe(18)


def parse_key(text: object) -> str:
    key = str(text or "").strip()
    if not _KEY.match(key):
        raise MalformedKey("malformed key")
    return key


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_key(key: str, salt: bytes | None = None) -> str:
    """scrypt$N$r$p$salt$hash — all a check needs, nothing that gives the key back."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hashlib.scrypt(key.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def check_key(key: str, stored: str) -> bool:
    """Does `key` match the stored hash? Constant-time comparison."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        got = hashlib.scrypt(key.encode(), salt=_unb64(salt), n=int(n), r=int(r), p=int(p), dklen=32)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, _unb64(digest))
