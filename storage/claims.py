"""Names on assignments without a class list belong to the browser profile that typed them first.

A typed name is no proof of who it is: another browser typing a classmate's name first (in any letter
case) used up the classmate's attempts. Now the first profile to type a name holds it; another
profile typing the same name is refused, and the clash is listed for the teacher, who admits it (the
same person on a second browser) or releases the name (api.release_name). The primary key of
name_claims decides who came first, so two browsers typing at once cannot both hold it.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .db import name_claims, name_clashes, writing

CLAIM_TRIES = 3


def profile_ref(profile: str) -> str:
    """What the teacher's list calls a browser: a digest of its profile id (the id itself stays private)."""
    return hashlib.sha256(b"claim\x1f" + profile.encode()).hexdigest()[:12]


def holds(conn: Connection, code: str, who: str, profile: str, name: str, at: datetime) -> bool:
    """Does `profile` hold the name `who` (normalised) on `code`? A free name is claimed for it here, in
    the caller's transaction (an IntegrityError when another profile claimed it at that moment)."""
    owner = conn.execute(sa.select(name_claims.c.profile).where(
        name_claims.c.assignment_code == code, name_claims.c.student_key == who)).scalar()
    if owner is None:
        conn.execute(sa.insert(name_claims).values(assignment_code=code, student_key=who, profile=profile,
                                                   name=name, claimed_at=at))
        return True
    if owner == profile:
        return True
    return bool(conn.execute(sa.select(name_clashes.c.admitted).where(
        name_clashes.c.assignment_code == code, name_clashes.c.student_key == who,
        name_clashes.c.profile == profile)).scalar())


def claim(engine: Engine, code: str, who: str, profile: str, name: str, at: datetime) -> bool:
    """Claim the name for `profile` (True: it holds it now, or was admitted); False when another profile
    holds it, and the clash is then listed for the teacher (once per profile and name)."""
    for _ in range(CLAIM_TRIES):
        try:
            with writing(engine).begin() as conn:
                if holds(conn, code, who, profile, name, at):
                    return True
                known = conn.execute(sa.select(name_clashes.c.at).where(
                    name_clashes.c.assignment_code == code, name_clashes.c.student_key == who,
                    name_clashes.c.profile == profile)).first()
                if known is None:
                    conn.execute(sa.insert(name_clashes).values(assignment_code=code, student_key=who,
                                                                profile=profile, name=name, at=at,
                                                                admitted=False))
            return False
        except sa.exc.IntegrityError:
            continue  # another browser claimed the name (or recorded this clash) at that moment: look again
    return False
