"""The scale-out recipe (deploy/): nginx in front of 2 Streamlit replicas on one PostgreSQL, on loopback.

A class of 30 websocket sessions checks answers on Practice and submits an assignment through nginx; one
replica is killed with SIGKILL mid-run. Then: every acknowledged attempt and submission is in the database,
the survivor's sessions saw no error, and the students of the dead replica reconnect (as the browser does:
poll /_stcore/health, open a new websocket) and carry on, on the survivor.

Needs Debian's nginx and postgresql (scripts/install_test_tools.sh): without them the tests skip, or fail
under CI=true. Bounded: 30 sessions, about 20 s of class, loopback only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import random
import re
import shutil
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlalchemy as sa
import websockets
from streamlit.proto.Alert_pb2 import Alert

import exercises
import storage
import storage.profiles
from deploy import cluster as deploy
from services import profiles
from tests.ws_client import Session, answer_texts, elements, open_root

STUDENTS = 30
KINDS = ["softmax", "scores", "masking", "weighted_sum", "scaling", "projection"]
PERIOD_S = 2.0  # between a student's checks
BEFORE_KILL_S = 5.0  # of class after every student's first load
AFTER_KILL_S = 12.0
LOAD_TIMEOUT_S = 40.0
RUN_TIMEOUT_S = 20.0
RECONNECT_LIMIT_S = 15.0
COOKIE = re.compile(rf"{deploy.ROUTE_COOKIE}=([0-9a-f]{{32}})")


def _missing() -> str | None:
    if deploy.nginx_binary() is None:
        return "nginx is not installed (Debian's nginx package; scripts/install_test_tools.sh)"
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and shutil.which("initdb") is None:
        return "PostgreSQL server binaries are not installed (Debian's postgresql package)"
    return None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def cluster():
    reason = _missing()
    if reason:
        _unavailable(reason)
    try:
        running = deploy.Cluster(replicas=2, port=0).start()
    except deploy.ClusterError as err:  # the tools are there: the recipe itself is broken
        pytest.fail(f"the cluster did not start: {err}")
    try:
        yield running
    finally:
        running.stop()


def get(url: str, cookie: str | None = None) -> tuple[int, dict[str, list[str]]]:
    """(status, headers by lower-case name) of a GET through nginx."""
    request = urllib.request.Request(url, headers={"Cookie": f"{deploy.ROUTE_COOKIE}={cookie}"} if cookie else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()
        headers: dict[str, list[str]] = {}
        for name, value in response.headers.items():
            headers.setdefault(name.lower(), []).append(value)
        return response.status, headers


def route_cookie(headers: dict[str, list[str]]) -> str | None:
    found = [COOKIE.search(v) for v in headers.get("set-cookie", [])]
    return next((m.group(1) for m in found if m), None)


# ---------------------------------------------------------------- config


def test_production_config_is_valid_streamlit_config():
    from streamlit import config

    flags = deploy.production_flags()
    options = dict(zip(flags[::2], flags[1::2]))
    known = config.get_config_options()
    assert all(flag.removeprefix("--") in known for flag in options), set(options) - {f"--{k}" for k in known}
    assert options["--client.showErrorDetails"] == "none"
    assert options["--server.address"] == "127.0.0.1"
    text = deploy.nginx_config(Path("/run/x"), "127.0.0.1:8080", [8501, 8502])
    assert "server 127.0.0.1:8501" in text and "server 127.0.0.1:8502" in text and not re.search(r"@[A-Z_]+@", text)


# ---------------------------------------------------------------- headers and stickiness


def test_security_headers_and_sticky_cookie(cluster):
    status, headers = get(cluster.url + "/")
    assert status == 200
    csp = headers["content-security-policy"][0]
    assert "frame-ancestors 'self'" in csp and "object-src 'none'" in csp
    assert headers["x-content-type-options"] == ["nosniff"]
    assert headers["referrer-policy"] == ["no-referrer"]
    assert "server" not in headers or headers["server"] == ["nginx"]  # no version
    cookie = route_cookie(headers)
    assert cookie, headers.get("set-cookie")
    assert any("HttpOnly" in v and "SameSite=Lax" in v for v in headers["set-cookie"] if cookie in v)
    profile = [v for v in headers["set-cookie"] if v.startswith(profiles.COOKIE + "=")]
    assert len(profile) == 1 and "HttpOnly" in profile[0] and "SameSite=Strict" in profile[0], \
        f"the replica's page through nginx sets the profile cookie: {headers['set-cookie']}"
    for _ in range(6):
        _, again = get(cluster.url + "/_stcore/health", cookie)
        assert route_cookie(again) is None  # a valid cookie is kept, not replaced
        assert again["x-content-type-options"] == ["nosniff"]
    _, forged = get(cluster.url + "/_stcore/health", "../../etc")
    assert route_cookie(forged)  # a malformed route is replaced by a fresh one
    upstreams = {line["upstream"] for line in cluster.access_log() if line.get("route") == cookie}
    assert len(upstreams) == 1, upstreams  # every request of one browser reached one replica


# ---------------------------------------------------------------- LTI through nginx


def test_lti_launch_and_passback_through_nginx_post_a_score_once(cluster, monkeypatch):
    """An instructor deep-links and a learner launches through nginx; the learner's score, queued while
    the platform is down, is then claimed by whichever of the replicas (woken by launches) or this
    process comes first, and reaches the platform exactly once."""
    import json

    import httpx2

    import storage.lti as store
    from services import db, lti
    from tests.lti_platform import Platform
    from tests.test_lti import deep_link, launch, submit_all_right, wait_for

    monkeypatch.setenv("DATABASE_URL", cluster.database_url)
    lti.forget_platform_keys()
    platform = Platform(tool_jwks=lambda: json.load(urllib.request.urlopen(cluster.url + "/lti/jwks", timeout=10)))
    platform.start()
    try:
        lti.register(**platform.registration())
        status, headers = get(cluster.url + "/lti/jwks")
        csp = headers["content-security-policy"][0]
        assert status == 200 and "form-action 'self' https:" in csp and "frame-ancestors 'self'" in csp, \
            "the LTI location's own headers: the deep-linking answer may post back to the LMS"
        with httpx2.Client(base_url=cluster.url) as teacher:
            code = deep_link(teacher, platform)
        with httpx2.Client(base_url=cluster.url) as learner:
            status, path, query = launch(learner, platform, sub="student-9", custom={"assignment": code})
        assert (status, path) == (200, "/assignments"), f"the learner's launch through nginx: {status} {path}"
        platform.failing = True
        submit_all_right(code, query["session"])
        engine = db.engine()
        wait_for(lambda: any(r["tries"] for r in store.outbox(engine, code).values()), "a failed post")
        platform.failing = False
        store.retry_now(engine, code, lti._now())
        served: set[str] = set()
        for n in range(12):  # fresh browsers land on either replica; each launch wakes that replica's poster
            with httpx2.Client(base_url=cluster.url) as other:
                assert launch(other, platform, sub=f"other-{n}", custom={"assignment": code})[1] == "/assignments"
            served = {line["upstream"] for line in cluster.access_log() if line.get("uri") == "/lti/launch"}
            if len(served) == 2:
                break
        assert len(served) == 2, f"launches reached both replicas: {served}"
        wait_for(lambda: platform.scores, "the score at the platform", drain=False)
        time.sleep(0.5)  # any second post would come now
        assert [body["userId"] for _, body in platform.scores] == ["student-9"], platform.scores
        assert store.outbox(engine, code)[next(iter(store.outbox(engine, code)))]["posts"] == 1
    finally:
        platform.stop()
        db.engine().dispose()


# ---------------------------------------------------------------- a class, and a replica's death


@dataclass
class Student:
    index: int
    cookie: str = ""
    profile: str = ""  # the secret of the browser's profile cookie (what the server's first page sets)
    browser: str = ""  # the browser's own id cookie, which that secret was issued to
    replica: int | None = None  # where nginx sent the first page
    acked: int = 0  # checks answered with feedback and no "not saved" notice
    in_flight: int = 0  # checks or submissions whose connection died before their answer
    submitted: bool = False
    submit_at: float = 0.0
    loaded: bool = False
    errors: list[str] = field(default_factory=list)  # before the kill, or on a live replica
    reconnects: int = 0
    acked_after_reconnect: int = 0
    acked_after_kill: int = 0
    errors_after_reconnect: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)

    @property
    def seed(self) -> int:
        return 5000 + self.index

    @property
    def name(self) -> str:
        return f"Student {self.index:02d}"

    def exercise(self) -> exercises.Exercise:
        kind = KINDS[self.index % len(KINDS)]
        levels = list(exercises.KINDS[kind].LEVELS)
        return exercises.generate(kind, self.seed, levels[self.index % len(levels)])

    def error(self, what: str) -> None:
        (self.errors_after_reconnect if self.reconnects else self.errors).append(what)

    @property
    def cookies(self) -> str:
        """The Cookie header of this browser: the sticky route and its profile (a name typed on an open
        assignment belongs to the profile that typed it first)."""
        return (f"{deploy.ROUTE_COOKIE}={self.cookie}; {profiles.COOKIE}={self.profile}; "
                f"{profiles.BROWSER_COOKIE}={self.browser}")


@dataclass
class Lesson:
    """What every session of the class shares: where to go, what to submit, and when it ends."""

    url: str
    code: str
    items: dict[str, list[exercises.Exercise]]  # by student name
    until: float  # time.monotonic() at which the students stop
    killed: asyncio.Event = field(default_factory=asyncio.Event)
    started: float = 0.0  # time.monotonic() of the class's start
    killed_at: float = float("inf")  # and of the kill


class ReplicaGone(Exception):
    """The websocket closed under a run: the replica behind it died."""


def run_problems(ok: bool, messages: list, want_feedback: bool = True) -> str | None:
    drawn = elements(messages)
    kinds = [e.WhichOneof("type") for e in drawn]
    if not ok:
        return "run did not finish"
    if "exception" in kinds:
        return "exception on the page"
    if "toast" in kinds:  # Progress's "attempt not saved"
        return "toast: " + next(e.toast.body for e in drawn if e.WhichOneof("type") == "toast")
    if want_feedback and "alert" not in kinds:
        return "no feedback shown"
    return None


async def run(session: Session, states: list | None = None, limit: float = RUN_TIMEOUT_S):
    try:
        return await asyncio.wait_for(session.run(states), limit)
    except (websockets.ConnectionClosed, OSError) as problem:
        raise ReplicaGone(type(problem).__name__) from None


async def submit(s: Student, lesson: Lesson) -> None:
    """Open the assignment in a second tab (same cookie), give the name, answer every item, submit."""
    code = lesson.code
    tab = Session(lesson.url, f"assignment={code}", page="assignments", cookie=s.cookies)
    try:
        await tab.connect()
        ok, messages = await run(tab, limit=LOAD_TIMEOUT_S)
        if problem := run_problems(ok, messages, want_feedback=False):
            s.error(f"assignment load: {problem}")
            return
        ok, messages = await run(tab, [*tab.typed({f"assign.name_input.{code}": s.name}), tab.press("submit")])
        if problem := run_problems(ok, messages, want_feedback=False):
            s.error(f"assignment start: {problem}")
            return
        # the grids' keys carry the item's position and a random slot id of this session (never the seed)
        slots = {m.group(1) for k in tab.widgets if (m := re.match(r"^asg-\d+-([0-9a-f]+)-", k))}
        if len(slots) != 1:
            s.error(f"assignment grids: slot ids {sorted(slots)}")
            return
        [slot] = slots
        texts = {}
        for index, ex in enumerate(lesson.items[s.name]):
            texts.update(answer_texts(ex, wrong=s.index % 2 == 1, prefix=f"asg-{index}-{slot}"))
        s.in_flight += 1
        ok, messages = await run(tab, [*tab.typed(texts), tab.press("submit")])
        s.in_flight -= 1
        success = [e for e in elements(messages) if e.WhichOneof("type") == "alert"
                   and e.alert.format == Alert.SUCCESS]
        if (problem := run_problems(ok, messages)) or not success:
            s.error(f"submission: {problem or 'no confirmation'}")
            return
        s.submitted = True
    finally:
        if tab.socket is not None:
            await tab.socket.close()


async def practise(s: Student, lesson: Lesson, rng: random.Random) -> None:
    """One websocket session on Practice: load, then a Check every PERIOD_S (and the assignment once)."""
    ex = s.exercise()
    session = Session(lesson.url, f"kind={ex.kind}&level={ex.level}&seed={ex.seed}",
                      cookie=s.cookies)
    try:
        await session.connect()
        ok, messages = await run(session, limit=LOAD_TIMEOUT_S)
        if (problem := run_problems(ok, messages, want_feedback=False)) or "submit" not in session.buttons:
            s.error(f"first load: {problem or 'no Check button'}")
            return
        s.loaded = True
        s.timeline.append(f"loaded {time.monotonic() - lesson.started:.1f}")
        await asyncio.sleep(rng.uniform(0, PERIOD_S))  # students do not click in lockstep
        count = 0
        # a student whose replica died carries on after the reconnect: at least one check on the new
        # session, however late in the class the reconnect came (a loaded CI machine may take seconds)
        while time.monotonic() < lesson.until or (s.reconnects and count == 0):
            if not s.submitted and time.monotonic() >= s.submit_at:
                await submit(s, lesson)
            started = time.monotonic()
            states = [*session.typed(answer_texts(ex, wrong=count % 2 == 1)), session.press("submit")]
            s.in_flight += 1
            ok, messages = await run(session, states)
            s.in_flight -= 1
            s.timeline.append(f"{started - lesson.started:.1f}+{time.monotonic() - started:.2f}")
            if problem := run_problems(ok, messages):
                s.error(f"check: {problem}")
            else:
                s.acked += 1
                s.acked_after_reconnect += bool(s.reconnects)
                s.acked_after_kill += started > lesson.killed_at
            count += 1
            await asyncio.sleep(max(0.0, PERIOD_S - (time.monotonic() - started)))
    finally:
        if session.socket is not None:
            await session.socket.close()


async def health_through_nginx(url: str, cookie: str) -> bool:
    """What the browser does after losing its websocket: poll /_stcore/health until it answers."""
    deadline = time.monotonic() + RECONNECT_LIMIT_S
    while time.monotonic() < deadline:
        try:
            status, _ = await asyncio.to_thread(get, url + "/_stcore/health", cookie)
            if status == 200:
                return True
        except OSError:
            pass
        await asyncio.sleep(0.25)  # the browser's retry interval, roughly
    return False


async def student(s: Student, lesson: Lesson, rng: random.Random) -> None:
    """A browser: the page (and its route cookie), then Practice over the websocket; after losing the
    websocket to a dead replica, the health poll and a new session, up to twice."""
    _, headers = await asyncio.to_thread(get, lesson.url + "/")
    s.cookie = route_cookie(headers) or ""
    while s.reconnects <= 2:  # practise keeps the class's clock; a reconnect is always tried
        try:
            await practise(s, lesson, rng)
            return
        except ReplicaGone as gone:
            if not lesson.killed.is_set():
                s.error(f"connection lost before the kill: {gone}")
                return
        except TimeoutError:
            s.error("timeout")
            return
        s.reconnects += 1
        if not await health_through_nginx(lesson.url, s.cookie):
            s.error("no replica answered the health check")
            return


async def one_class(cluster: deploy.Cluster, lesson: Lesson, students: list[Student], victim: int) -> None:
    rng = random.Random(18)
    start = time.monotonic()
    lesson.started = start
    for s in students:
        s.submit_at = start + rng.uniform(1.0, 10.0)  # some before the kill, some after it
    tasks = [asyncio.create_task(student(s, lesson, rng)) for s in students]
    while not all(s.loaded or s.errors for s in students) and time.monotonic() < start + LOAD_TIMEOUT_S:
        await asyncio.sleep(0.2)  # waiting for the class to arrive
    await asyncio.sleep(BEFORE_KILL_S)
    routes = {line["route"]: cluster.replica_of(line.get("upstream", ""))
              for line in cluster.access_log() if line.get("uri") == "/" and line.get("route")}
    for s in students:
        s.replica = routes.get(s.cookie)
    lesson.killed_at = time.monotonic()
    lesson.killed.set()
    print(f"kill at {time.monotonic() - lesson.started:.1f} s")
    await asyncio.to_thread(cluster.kill_replica, victim)
    lesson.until = time.monotonic() + AFTER_KILL_S
    for s in students:  # whoever has not submitted yet does so on the survivor
        s.submit_at = min(s.submit_at, time.monotonic() + AFTER_KILL_S / 2)
    await asyncio.sleep(AFTER_KILL_S)
    _, pending = await asyncio.wait(tasks, timeout=LOAD_TIMEOUT_S + RUN_TIMEOUT_S)  # a late reconnect loads, then checks
    for task in pending:
        task.cancel()
    assert not pending, f"{len(pending)} sessions did not finish"
    for task in tasks:
        task.result()  # an exception in a session fails the test



def run_in_own_loop(coroutine) -> None:
    """asyncio.run in a thread of its own: a browser test earlier in the session (Playwright's sync
    API) may leave an event loop running in the main thread, where asyncio.run refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()

def test_replica_killed_mid_class_loses_nothing(cluster):
    engine = storage.open_engine(cluster.database_url)
    created = storage.create_assignment(engine, "Deploy drill", [{"kind": "softmax", "level": 1, "count": 1},
                                                                  {"kind": "scaling", "level": 1, "count": 1}],
                                        seed=18, per_student=False, allow_solutions=False)
    code = created.assignment.code
    students = [Student(i, profile=profiles.new_secret(), browser=profiles.new_secret()) for i in range(STUDENTS)]
    for s in students:  # each browser has its profile, as its first page would have made it
        storage.profiles.create_profile(engine, "browser", s.profile, browser=profiles.browser_digest(s.browser))
    secret = storage.server_secret(engine)  # the variants are keyed with it
    items = {s.name: [exercises.generate(slot.kind, seed, slot.level)
                      for slot, seed in created.assignment.spec.seeds(s.name, secret=secret)] for s in students}

    async def warm(replica_url: str) -> None:
        """A replica runs the app frame once (see ws_client.open_root), then Practice and the assignment, as
        the first visitors of a real class would have done (the first run of a page imports its modules)."""
        await open_root(replica_url)
        tabs = [Session(replica_url, "kind=softmax&level=1&seed=1"),
                Session(replica_url, f"assignment={code}", page="assignments")]
        for tab in tabs:
            await tab.connect()
        try:
            await asyncio.gather(*(run(tab, limit=LOAD_TIMEOUT_S) for tab in tabs))
        finally:
            for tab in tabs:
                await tab.socket.close()

    async def warm_all() -> None:
        await asyncio.gather(*(warm(replica_url) for replica_url in cluster.replica_urls))

    run_in_own_loop(warm_all())
    victim, survivor = 0, 1
    lesson = Lesson(cluster.url, code, items, until=time.monotonic() + 3600)
    began = time.monotonic()
    run_in_own_loop(one_class(cluster, lesson, students, victim))
    print(f"class: {time.monotonic() - began:.1f} s; per student: replica, checks acknowledged (after the "
          "reconnect), submitted, errors, timeline (s from the start: loads, check start + duration)")
    for s in students:  # shown by pytest when an assertion below fails
        print(s.index, s.replica, s.acked, f"({s.acked_after_reconnect})", s.submitted,
              s.errors + s.errors_after_reconnect, " ".join(s.timeline))

    on = {r: [s for s in students if s.replica == r] for r in (victim, survivor)}
    assert all(s.replica is not None for s in students), [s.index for s in students if s.replica is None]
    assert on[victim] and on[survivor], "the 30 route cookies all hashed to one replica"

    # the survivor's sessions: no error at all, checks acknowledged before and after the kill
    for s in on[survivor]:
        assert not s.errors and not s.errors_after_reconnect and not s.reconnects, (s.index, s.errors)
        assert s.acked >= 2 and s.acked_after_kill >= 1 and s.submitted, (s.index, s.acked, s.submitted)
    # the dead replica's students: fine before the kill, then reconnected and carried on
    for s in on[victim]:
        assert not s.errors, (s.index, s.errors)
        assert s.reconnects == 1, (s.index, s.reconnects)
        assert not s.errors_after_reconnect, (s.index, s.errors_after_reconnect)
        assert s.acked_after_reconnect >= 1 and s.submitted, (s.index, s.acked_after_reconnect, s.submitted)

    # ... on the survivor: every request of theirs after the kill went there, as nginx's log shows
    victim_port, survivor_port = cluster.replica_ports[victim], cluster.replica_ports[survivor]
    log = cluster.access_log()
    for s in students:
        mine = [line for line in log if line.get("route") == s.cookie]
        last = {cluster.replica_of(line["upstream"]) for line in mine}
        if s.replica == survivor:
            assert last == {survivor}, (s.index, [line["upstream"] for line in mine])  # sticky throughout
        else:
            health = [line for line in mine if line["uri"] == "/_stcore/health" and line["status"] == "200"]
            assert health and all(cluster.replica_of(line["upstream"]) == survivor for line in health), \
                (s.index, victim_port, survivor_port, [line["upstream"] for line in health])
            streams = [line for line in mine if line["uri"] == "/_stcore/stream" and line["status"] == "101"]
            assert any(cluster.replica_of(line["upstream"]) == survivor for line in streams), \
                (s.index, [line["upstream"] for line in streams])

    # every acknowledged attempt and submission is in the database (one per check: the seed is the student's)
    with engine.connect() as conn:
        attempts = dict(conn.execute(sa.select(storage.db.attempts.c.seed, sa.func.count())
                                     .group_by(storage.db.attempts.c.seed)).all())
        submitted = dict(conn.execute(sa.select(storage.db.submissions.c.student, sa.func.count())
                                      .where(storage.db.submissions.c.assignment_code == code)
                                      .group_by(storage.db.submissions.c.student)).all())
    engine.dispose()
    for s in students:
        stored = attempts.get(s.seed, 0)
        # acknowledged ones are all there; a check whose replica died under it may or may not be
        assert s.acked <= stored <= s.acked + s.in_flight + s.reconnects, (s.index, s.acked, stored)
        assert submitted.get(s.name, 0) >= len(items[s.name]), (s.name, submitted.get(s.name))
    # how many checks a loaded machine fits in the class is not the point: each student's minimum is (above)
    assert all(s.acked >= 1 for s in students), [s.index for s in students if not s.acked]
