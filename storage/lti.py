"""LTI 1.3 in the database: platform registrations, the tool's signing keys, the nonces of logins in
flight, which assignment belongs to which course, the people a platform launched, and the outbox of
scores to post back (DESIGN §11).

Every rule that must hold across replicas is a row here: a nonce is spent by deleting its row (one
DELETE finds it, a replay finds nothing); a score is posted by the replica that claimed its outbox row
(an UPDATE that only one transaction can win), once per revision.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .db import metadata, roster, writing

# ---------------------------------------------------------------- tables

lti_platforms = sa.Table(
    "lti_platforms", metadata,
    sa.Column("issuer", sa.String(255), primary_key=True),
    sa.Column("client_id", sa.String(255), primary_key=True),
    sa.Column("auth_login_url", sa.String(500), nullable=False),  # the platform's OIDC authorization endpoint
    sa.Column("token_url", sa.String(500), nullable=False),  # OAuth 2 client credentials (AGS, NRPS)
    sa.Column("jwks_url", sa.String(500), nullable=False),  # the platform's public keys
    sa.Column("deployments", sa.JSON, nullable=False),  # the deployment ids this tool is installed under
    sa.Column("created_at", sa.DateTime, nullable=False),
)

# The tool's RSA keys: the newest signs; the JWKS publishes the newest two (current and previous).
lti_keys = sa.Table(
    "lti_keys", metadata,
    sa.Column("kid", sa.String(64), primary_key=True),
    sa.Column("private_pem", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False, index=True),
)

# A login in flight: the nonce the tool sent to the platform, spent (deleted) by the launch that carries it.
lti_nonces = sa.Table(
    "lti_nonces", metadata,
    sa.Column("nonce", sa.String(64), primary_key=True),
    sa.Column("state_hash", sa.String(64), nullable=False),  # the state cookie's digest: the same browser
    sa.Column("issuer", sa.String(255), nullable=False),
    sa.Column("client_id", sa.String(255), nullable=False),
    sa.Column("expires_at", sa.DateTime, nullable=False, index=True),
)

# A launch's session on its way into the pages: the page the launch moves on to carries a one-time code
# (its digest is the key), spent by the first page that presents it, within HANDOFF_S (an iframe's page
# may not get the launch's cookie; a copied address opens nothing once spent).
lti_handoffs = sa.Table(
    "lti_handoffs", metadata,
    sa.Column("code_hash", sa.String(64), primary_key=True),
    sa.Column("session", sa.Text, nullable=False),
    sa.Column("expires_at", sa.DateTime, nullable=False, index=True),
)

# An assignment made from a course (deep linking): which platform, deployment and course own it, the
# line item its scores go to, and its teacher key sealed with the server secret (instructors of that
# course open its gradebook without typing it).
lti_assignments = sa.Table(
    "lti_assignments", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("issuer", sa.String(255), nullable=False),
    sa.Column("client_id", sa.String(255), nullable=False),
    sa.Column("deployment", sa.String(255), nullable=False),
    sa.Column("context", sa.String(255), nullable=False),
    sa.Column("sealed_key", sa.Text, nullable=False),
    sa.Column("lineitem", sa.String(500), nullable=True),  # learned at the first launch that names it
    sa.Column("created_at", sa.DateTime, nullable=False),
)

# A person a platform launched or listed: (issuer, deployment, course, sub), known here by a digest.
# `label` is the name the gradebook shows, fixed when first seen (a digest suffix tells namesakes apart).
lti_people = sa.Table(
    "lti_people", metadata,
    sa.Column("person", sa.String(64), primary_key=True),
    sa.Column("issuer", sa.String(255), nullable=False),
    sa.Column("deployment", sa.String(255), nullable=False),
    sa.Column("context", sa.String(255), nullable=False),
    sa.Column("sub", sa.String(255), nullable=False),
    sa.Column("label", sa.String(100), nullable=False),
    sa.Column("seen_at", sa.DateTime, nullable=False),
)

# The outbox of grade passback: one row per assignment and student. A new counting score raises
# `revision`; a replica claims the row (claimed_until in the future: no one else takes it), posts, and
# records the revision posted. A failed post waits until next_try and is claimed again.
lti_scores = sa.Table(
    "lti_scores", metadata,
    sa.Column("assignment_code", sa.String(16), sa.ForeignKey("assignments.code", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("person", sa.String(64), primary_key=True),
    sa.Column("score", sa.Float, nullable=False),  # 0..1, the counting attempt's
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("posted_revision", sa.Integer, nullable=False),
    sa.Column("posts", sa.Integer, nullable=False),  # successful posts, ever (a test reads it)
    sa.Column("tries", sa.Integer, nullable=False),  # failed tries in a row
    sa.Column("next_try", sa.DateTime, nullable=False),
    sa.Column("claimed_by", sa.String(40), nullable=True),
    sa.Column("claimed_until", sa.DateTime, nullable=True),
    sa.Column("scored_at", sa.DateTime, nullable=False),
    sa.Column("last_error", sa.String(200), nullable=True),
)

CLAIM_S = 60  # a claim left by a replica that died is taken over after this
MAX_BACKOFF_S = 3600.0


# ---------------------------------------------------------------- registrations and keys


@dataclass(frozen=True)
class Platform:
    issuer: str
    client_id: str
    auth_login_url: str
    token_url: str
    jwks_url: str
    deployments: tuple[str, ...]


def register_platform(engine: Engine, platform: Platform, at: datetime) -> None:
    """Add or replace a platform's registration."""
    values = {"auth_login_url": platform.auth_login_url, "token_url": platform.token_url,
              "jwks_url": platform.jwks_url, "deployments": list(platform.deployments)}
    with writing(engine).begin() as conn:
        mine = sa.and_(lti_platforms.c.issuer == platform.issuer, lti_platforms.c.client_id == platform.client_id)
        if conn.execute(sa.update(lti_platforms).where(mine).values(**values)).rowcount == 0:
            conn.execute(sa.insert(lti_platforms).values(issuer=platform.issuer, client_id=platform.client_id,
                                                         created_at=at, **values))


def platform(engine: Engine, issuer: str, client_id: str | None) -> Platform | None:
    """The registration of (issuer, client_id); with client_id None, the issuer's only one."""
    query = sa.select(lti_platforms).where(lti_platforms.c.issuer == issuer)
    if client_id is not None:
        query = query.where(lti_platforms.c.client_id == client_id)
    with engine.connect() as conn:
        rows = conn.execute(query.limit(2)).all()
    if len(rows) != 1:
        return None
    r = rows[0]
    return Platform(r.issuer, r.client_id, r.auth_login_url, r.token_url, r.jwks_url,
                    tuple(str(d) for d in r.deployments or ()))


def add_key(engine: Engine, kid: str, private_pem: str, at: datetime) -> None:
    with writing(engine).begin() as conn:
        conn.execute(sa.insert(lti_keys).values(kid=kid, private_pem=private_pem, created_at=at))


def newest_keys(engine: Engine, count: int = 2) -> list[tuple[str, str]]:
    """(kid, private PEM) of the newest `count` keys, newest first."""
    with engine.connect() as conn:
        return [(r.kid, r.private_pem) for r in conn.execute(
            sa.select(lti_keys.c.kid, lti_keys.c.private_pem)
            .order_by(lti_keys.c.created_at.desc(), lti_keys.c.kid).limit(count)).all()]


# ---------------------------------------------------------------- nonces


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def issue_nonce(engine: Engine, nonce: str, state: str, issuer: str, client_id: str, expires_at: datetime,
                now: datetime) -> None:
    """Keep a login's nonce until its launch (or expiry); expired ones are swept here."""
    with writing(engine).begin() as conn:
        conn.execute(sa.delete(lti_nonces).where(lti_nonces.c.expires_at < now))
        conn.execute(sa.insert(lti_nonces).values(nonce=nonce, state_hash=digest(state), issuer=issuer,
                                                  client_id=client_id, expires_at=expires_at))


def spend_nonce(engine: Engine, nonce: str, state: str, issuer: str, client_id: str, now: datetime) -> bool:
    """True once for a nonce this tool issued to this browser's login (its state) and this platform:
    the row is deleted in the same statement, so a replayed launch, on any replica, finds nothing."""
    with writing(engine).begin() as conn:
        return conn.execute(sa.delete(lti_nonces).where(
            lti_nonces.c.nonce == nonce, lti_nonces.c.state_hash == digest(state), lti_nonces.c.issuer == issuer,
            lti_nonces.c.client_id == client_id, lti_nonces.c.expires_at >= now)).rowcount == 1


def hand_off(engine: Engine, code: str, session: str, expires_at: datetime, now: datetime) -> None:
    """Keep a launch's session under a one-time code until a page spends it (or it expires)."""
    with writing(engine).begin() as conn:
        conn.execute(sa.delete(lti_handoffs).where(lti_handoffs.c.expires_at < now))
        conn.execute(sa.insert(lti_handoffs).values(code_hash=digest(code), session=session, expires_at=expires_at))


def take_handoff(engine: Engine, code: str, now: datetime) -> str | None:
    """The session handed off under `code`, once: the row is deleted, and only the transaction whose
    DELETE removed it (on any replica) gets the session."""
    where = (lti_handoffs.c.code_hash == digest(code), lti_handoffs.c.expires_at >= now)
    with writing(engine).begin() as conn:
        session = conn.execute(sa.select(lti_handoffs.c.session).where(*where)).scalar()
        if session is None or conn.execute(sa.delete(lti_handoffs).where(*where)).rowcount != 1:
            return None
        return session


# ---------------------------------------------------------------- courses, assignments, people


@dataclass(frozen=True)
class Course:
    issuer: str
    deployment: str
    context: str


@dataclass(frozen=True)
class Linked:
    code: str
    client_id: str
    course: Course
    sealed_key: str
    lineitem: str | None


def link_assignment(engine: Engine, code: str, client_id: str, course: Course, sealed_key: str,
                    at: datetime) -> bool:
    """Give the assignment to the course (True); False when another course or platform has it already
    (an assignment belongs to one course: its scores go to one line item)."""
    with writing(engine).begin() as conn:
        have = conn.execute(sa.select(lti_assignments).where(lti_assignments.c.assignment_code == code)
                            .with_for_update()).first()
        if have is not None:
            return (Course(have.issuer, have.deployment, have.context), have.client_id) == (course, client_id)
        conn.execute(sa.insert(lti_assignments).values(
            assignment_code=code, issuer=course.issuer, client_id=client_id, deployment=course.deployment,
            context=course.context, sealed_key=sealed_key, created_at=at))
    return True


def linked(engine: Engine, code: str) -> Linked | None:
    with engine.connect() as conn:
        r = conn.execute(sa.select(lti_assignments).where(lti_assignments.c.assignment_code == code)).first()
    if r is None:
        return None
    return Linked(r.assignment_code, r.client_id, Course(r.issuer, r.deployment, r.context), r.sealed_key, r.lineitem)


def set_lineitem(engine: Engine, code: str, lineitem: str) -> None:
    with writing(engine).begin() as conn:
        conn.execute(sa.update(lti_assignments).where(lti_assignments.c.assignment_code == code,
                                                      lti_assignments.c.lineitem.is_distinct_from(lineitem))
                     .values(lineitem=lineitem))


def person_id(course: Course, sub: str) -> str:
    """Who a launched person is: their platform's `sub` in that deployment's course (a digest)."""
    return digest("\x1f".join(("lti", course.issuer, course.deployment, course.context, sub)))[:32]


def remember_person(engine: Engine, course: Course, sub: str, name: str, at: datetime) -> str:
    """The label a person is shown under (fixed the first time they are seen)."""
    person = person_id(course, sub)
    label = f"{name[:70]} ({person[:6]})"
    for _ in range(3):
        with engine.connect() as conn:
            known = conn.execute(sa.select(lti_people.c.label).where(lti_people.c.person == person)).scalar()
        if known is not None:
            return str(known)
        try:
            with writing(engine).begin() as conn:
                conn.execute(sa.insert(lti_people).values(person=person, issuer=course.issuer,
                                                          deployment=course.deployment, context=course.context,
                                                          sub=sub, label=label, seen_at=at))
            return label
        except sa.exc.IntegrityError:
            continue  # another replica saw them at that moment: read theirs
    return label


def sub_of(engine: Engine, person: str) -> str | None:
    """The platform's user id of a person (what a score is posted for)."""
    with engine.connect() as conn:
        return conn.execute(sa.select(lti_people.c.sub).where(lti_people.c.person == person)).scalar()


def set_class_list(engine: Engine, code: str, labels: list[str], at: datetime) -> int:
    """The course's roster becomes the assignment's class list (added to it: no one is removed, so a
    learner who dropped keeps their marks). No personal links: launched learners need none."""
    added = 0
    with writing(engine).begin() as conn:
        have = set(conn.execute(sa.select(roster.c.student_key).where(roster.c.assignment_code == code)).scalars())
        position = len(have)
        for label in labels:
            key = label.casefold()
            if key in have:
                continue
            have.add(key)
            conn.execute(sa.insert(roster).values(
                assignment_code=code, student_key=key, name=label, position=position, issued_at=at,
                token_hash=digest("unused\x1f" + secrets.token_hex(16))))  # no link is ever given out
            position += 1
            added += 1
    return added


# ---------------------------------------------------------------- the outbox of scores


def queue_score(engine: Engine, code: str, person: str, score: float, at: datetime) -> None:
    """A new counting score for (assignment, person): the next post sends it (a score equal to the one
    last queued is no new revision)."""
    for _ in range(3):
        try:
            with writing(engine).begin() as conn:
                mine = sa.and_(lti_scores.c.assignment_code == code, lti_scores.c.person == person)
                row = conn.execute(sa.select(lti_scores).where(mine).with_for_update()).first()
                if row is None:
                    conn.execute(sa.insert(lti_scores).values(
                        assignment_code=code, person=person, score=score, revision=1, posted_revision=0,
                        posts=0, tries=0, next_try=at, scored_at=at))
                elif row.score != score or row.posted_revision < row.revision:
                    conn.execute(sa.update(lti_scores).where(mine).values(
                        score=score, revision=row.revision + (row.score != score), next_try=at, tries=0,
                        scored_at=at))
            return
        except sa.exc.IntegrityError:
            continue


@dataclass(frozen=True)
class Claimed:
    code: str
    person: str
    score: float
    revision: int
    scored_at: datetime
    tries: int


def due(engine: Engine, now: datetime, limit: int = 50) -> list[tuple[str, str]]:
    """(assignment, person) of scores waiting to be posted, oldest first."""
    with engine.connect() as conn:
        return [(r.assignment_code, r.person) for r in conn.execute(
            sa.select(lti_scores.c.assignment_code, lti_scores.c.person).where(
                lti_scores.c.posted_revision < lti_scores.c.revision, lti_scores.c.next_try <= now,
                sa.or_(lti_scores.c.claimed_until.is_(None), lti_scores.c.claimed_until < now))
            .order_by(lti_scores.c.scored_at).limit(limit)).all()]


def claim_score(engine: Engine, code: str, person: str, worker: str, now: datetime) -> Claimed | None:
    """Take (assignment, person)'s unposted score for `worker`, or None when there is none or another
    worker holds it: one UPDATE decides, so two replicas never both post it."""
    mine = sa.and_(lti_scores.c.assignment_code == code, lti_scores.c.person == person)
    with writing(engine).begin() as conn:
        taken = conn.execute(sa.update(lti_scores).where(
            mine, lti_scores.c.posted_revision < lti_scores.c.revision, lti_scores.c.next_try <= now,
            sa.or_(lti_scores.c.claimed_until.is_(None), lti_scores.c.claimed_until < now))
            .values(claimed_by=worker, claimed_until=now + timedelta(seconds=CLAIM_S))).rowcount
        if taken != 1:
            return None
        r = conn.execute(sa.select(lti_scores).where(mine)).first()
    return Claimed(code, person, float(r.score), int(r.revision), r.scored_at, int(r.tries))


def posted(engine: Engine, claim: Claimed, worker: str) -> None:
    with writing(engine).begin() as conn:
        conn.execute(sa.update(lti_scores).where(
            lti_scores.c.assignment_code == claim.code, lti_scores.c.person == claim.person,
            lti_scores.c.claimed_by == worker).values(
            posted_revision=claim.revision,  # revisions only grow, and only this worker posts them
            posts=lti_scores.c.posts + 1, tries=0, claimed_by=None, claimed_until=None, last_error=None))


def post_failed(engine: Engine, claim: Claimed, worker: str, error: str, now: datetime) -> float:
    """Release the claim; the next try waits 2^tries seconds (≤ an hour). The wait is returned."""
    wait = min(MAX_BACKOFF_S, 2.0 ** min(claim.tries + 1, 20))
    with writing(engine).begin() as conn:
        conn.execute(sa.update(lti_scores).where(
            lti_scores.c.assignment_code == claim.code, lti_scores.c.person == claim.person,
            lti_scores.c.claimed_by == worker).values(
            tries=lti_scores.c.tries + 1, next_try=now + timedelta(seconds=wait), claimed_by=None,
            claimed_until=None, last_error=error[:200]))
    return wait


def outbox(engine: Engine, code: str) -> dict[str, dict[str, Any]]:
    """{person: the outbox row} of an assignment (for tests and the instructor's view)."""
    with engine.connect() as conn:
        return {r.person: dict(r._mapping) for r in conn.execute(
            sa.select(lti_scores).where(lti_scores.c.assignment_code == code)).all()}


def retry_now(engine: Engine, code: str, now: datetime) -> None:
    """Every waiting score of the assignment is due now (an instructor's "send again")."""
    with writing(engine).begin() as conn:
        conn.execute(sa.update(lti_scores).where(lti_scores.c.assignment_code == code,
                                                 lti_scores.c.posted_revision < lti_scores.c.revision)
                     .values(next_try=now))
