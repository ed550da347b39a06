"""The LTI 1.3 tool against a simulated LMS (tests/lti_platform.py): deep linking, the roster, a
learner's launch → submission → the score at the platform (retried while it is down, never twice),
on SQLite and PostgreSQL; and each launch the tool must refuse."""

from __future__ import annotations

import functools
import html
import re
import time
import urllib.parse
from datetime import timedelta
from typing import Any

import jwt
import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization
from starlette.applications import Starlette
from starlette.testclient import TestClient

import storage
import storage.lti as store
from exercises.cli import selftest
from services import assignments, db, gradebook, lti, lti_cli, submissions
from storage.db import throttles, writing
from tests.lti_platform import CLIENT_ID, INSTRUCTOR, LEARNER, Platform, new_key
from tests.test_storage import db_url  # noqa: F401  (fixture: SQLite and PostgreSQL)
from ui.lti_routes import ROUTES


@functools.cache
def tool_key() -> tuple[str, str]:
    kid, key = new_key()
    return kid, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()).decode()


def _tool(url: str, monkeypatch: pytest.MonkeyPatch):
    if url.startswith("sqlite"):
        monkeypatch.delenv("DATABASE_URL", raising=False)
        monkeypatch.setenv("ATTENTION_DB_PATH", url.removeprefix("sqlite:///"))
    else:
        monkeypatch.setenv("DATABASE_URL", url)
    lti.forget_platform_keys()
    kid, pem = tool_key()
    store.add_key(db.engine(), kid, pem, lti._now())  # the tool's key, made once per test run
    platform = Platform(tool_jwks=lti.jwks).start()
    lti.register(**platform.registration())
    with TestClient(Starlette(routes=ROUTES), base_url="http://tool.test") as client:
        yield platform, client
    platform.stop()
    db.engine().dispose()


@pytest.fixture
def tool(db_url, monkeypatch):  # noqa: F811
    """The app's database at `db_url` (SQLite, PostgreSQL), a registered simulated platform, a client of the routes."""
    yield from _tool(db_url, monkeypatch)


@pytest.fixture
def sqlite_tool(tmp_path, monkeypatch):
    """The same on SQLite alone (what does not depend on the database is checked once)."""
    yield from _tool(f"sqlite:///{tmp_path / 'lti.sqlite3'}", monkeypatch)


def login(client: Any, platform: Platform) -> tuple[str, str]:
    """Login initiation: the platform's authorization request carries the state and the nonce."""
    r = client.get("/lti/login", params={"iss": platform.url, "login_hint": "hint", "client_id": CLIENT_ID,
                                         "target_link_uri": "http://tool.test/lti/launch"}, follow_redirects=False)
    assert r.status_code == 302, r.text
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(r.headers["location"]).query)
    assert query["redirect_uri"] == [str(client.base_url).rstrip("/") + "/lti/launch"], query["redirect_uri"]
    assert query["client_id"] == [CLIENT_ID]
    return query["state"][0], query["nonce"][0]


def launch(client: Any, platform: Platform, **claims) -> tuple[int, str, dict[str, str]]:
    """A whole launch: (status, landing path, landing query); the id_token made by the platform."""
    state, nonce = login(client, platform)
    token = platform.id_token(nonce, **claims)
    r = client.post("/lti/launch", data={"id_token": token, "state": state}, follow_redirects=False)
    return landing(r)


def landing(r: Any) -> tuple[int, str, dict[str, str]]:
    """(status, the page a launch moves on to, its query and the "session" the launch opened: its
    cookie, or the builder form's field); (status, the page's text, {}) for a refusal.
    A launch answers with a page of its own that moves on (no redirect: see ui/lti_routes.launch)."""
    builder = re.search(r'name="lti" value="([^"]+)"', r.text)
    if r.status_code == 200 and builder and 'name="kind"' in r.text:
        return 200, "/lti/deep_link", {"session": html.unescape(builder.group(1))}
    found = re.search(r'http-equiv="refresh" content="0; url=([^"]+)"', r.text)
    if r.status_code != 200 or found is None:
        return r.status_code, r.text, {}
    where = urllib.parse.urlsplit(html.unescape(found.group(1)))
    query = {k: v[0] for k, v in urllib.parse.parse_qs(where.query).items()}
    cookies = [c for c in r.headers.get_list("set-cookie") if re.match(rf"(__Host-)?{lti.SESSION_COOKIE}=", c)]
    assert len(cookies) == 1, f"the launch sets its session cookie: {r.headers.get_list('set-cookie')}"
    return 200, where.path, {**query, "session": cookies[0].split(";")[0].split("=", 1)[1], "set-cookie": cookies[0]}


def deep_link(client: Any, platform: Platform, context: str = "course-A") -> str:
    """An instructor adds an assignment from the LMS; the code the platform's resource link carries."""
    status, path, query = launch(client, platform, sub="teacher-1", roles=(INSTRUCTOR,), context=context,
                                 message_type="LtiDeepLinkingRequest")
    assert (status, path) == (200, "/lti/deep_link"), f"deep-linking launch, the builder form: {status} {path}"
    back = client.post("/lti/deep_link", data={"lti": query["session"], "title": "Week <3>", "kind": "softmax",
                                               "level": "1", "count": "2"})
    assert back.status_code == 200, back.text
    assert "Week <3>" not in back.text, "the title is escaped in the page"
    action = re.search(r'action="([^"]+)"', back.text).group(1)
    assert action == platform.url + "/deep_link_return", "the answer goes to the platform's return URL"
    answer = platform.read_deep_link(re.search(r'name="JWT" value="([^"]+)"', back.text).group(1))
    assert answer[lti.LTI + "message_type"] == "LtiDeepLinkingResponse"
    assert answer["https://purl.imsglobal.org/spec/lti-dl/claim/data"] == "opaque-42", "the platform's data returned"
    [item] = answer["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"]
    assert item["type"] == "ltiResourceLink" and item["title"] == "Week <3>"
    return item["custom"]["assignment"]


def submit_all_right(code: str, token: str) -> None:
    """What the Assignments page does for the launched learner: their exercises, graded, stored."""
    name, person = lti.learner_name(token, code)
    a = assignments.load(code)
    items = submissions.exercises_for(a, name)
    answers = {i: {p.name: p.reference.tolist() for p in ex.parts} for i, ex in enumerate(items)}
    graded = submissions.grade_all(items, answers, allow_blank=False)
    assert graded.score(len(items)) == 1.0, "the references score 1.0"
    submissions.submit(a, name, items, graded, person=person)


def wait_for(predicate, what: str, limit: float = 10.0, drain: bool = True) -> None:
    """Wait until `predicate()`; `drain`: this process posts due scores meanwhile (else others must)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        if drain:
            lti.drain()
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ---------------------------------------------------------------- the whole way, on both databases


def test_deep_link_roster_launch_submission_and_score_at_the_platform(tool):
    platform, client = tool
    platform.members = [{"user_id": f"student-{i}", "name": f"Learner {i}", "roles": [LEARNER], "status": "Active"}
                        for i in (1, 2)] + [{"user_id": "teacher-1", "name": "T", "roles": [INSTRUCTOR]}]
    code = deep_link(client, platform)
    # the instructor opens the link: the gradebook, without a teacher key; the roster is the class list
    status, path, query = launch(client, platform, sub="teacher-1", roles=(INSTRUCTOR,), custom={"assignment": code})
    assert (status, path, query.get("code")) == (200, "/gradebook", code), "an instructor lands on the gradebook"
    key = lti.teacher_key(query["session"], code)
    assert key is not None and gradebook.load(code, key).assignment.code == code, "the sealed key opens it"
    wait_for(lambda: len(storage.roster_names(db.engine(), code)) == 2, "the roster read in the background")
    roster = storage.roster_names(db.engine(), code)
    assert len(roster) == 2 and all(n.startswith("Learner ") for n in roster), f"learners only: {roster}"
    # a learner: no typed name, their own assignment, the score posted to the line item
    status, path, query = launch(client, platform, sub="student-1", custom={"assignment": code})
    assert (status, path, query.get("assignment")) == (200, "/assignments", code), "a learner lands on the assignment"
    name, person = lti.learner_name(query["session"], code)
    assert name in roster and person.startswith("lti:"), f"the launched learner is on the class list: {name}"
    submit_all_right(code, query["session"])
    wait_for(lambda: platform.scores, "the score at the platform")
    [(lineitem, body)] = platform.scores
    assert lineitem == platform.lineitem() and body["userId"] == "student-1"
    assert (body["scoreGiven"], body["scoreMaximum"], body["gradingProgress"]) == (100.0, 100, "FullyGraded")
    assert platform.assertions and platform.assertions[-1]["aud"] == platform.url + "/token", "a signed assertion"
    assert lti.drain() == 0 and len(platform.scores) == 1, "nothing is posted again"


def test_passback_is_retried_while_the_platform_is_down_and_posted_once(sqlite_tool):
    platform, client = sqlite_tool
    code = deep_link(client, platform)
    _, _, query = launch(client, platform, sub="student-1", custom={"assignment": code})
    platform.failing = True
    submit_all_right(code, query["session"])
    engine = db.engine()
    wait_for(lambda: any(r["tries"] for r in store.outbox(engine, code).values()), "a failed try")
    [row] = store.outbox(engine, code).values()
    assert row["posted_revision"] == 0 and row["last_error"], "not posted, the error kept"
    assert lti.drain() == 0, "not due again before its wait"
    platform.failing = False
    store.retry_now(engine, code, lti._now())
    # two replicas reach for it at once: one claim wins
    first = store.claim_score(engine, code, row["person"], "replica-a", lti._now())
    second = store.claim_score(engine, code, row["person"], "replica-b", lti._now())
    assert first is not None and second is None, "a claimed score is no one else's"
    lti.post_score(first)
    store.posted(engine, first, "replica-a")
    assert lti.drain() == 0 and len(platform.scores) == 1, "posted once"
    assert store.outbox(engine, code)[row["person"]]["posts"] == 1
    store.queue_score(engine, code, row["person"], 1.0, lti._now())  # the same counting score again
    assert lti.drain() == 0 and store.outbox(engine, code)[row["person"]]["revision"] == 1, "no new post"
    store.queue_score(engine, code, row["person"], 0.5, lti._now())  # a new counting score
    wait_for(lambda: platform.scores[-1][1]["scoreGiven"] == 50.0, "the changed score at the platform")
    assert store.outbox(engine, code)[row["person"]]["posts"] == 2 and len(platform.scores) == 2, "posted once more"


def test_a_nonce_is_spent_and_a_score_claimed_once_by_sessions_at_once(tool):
    """What keeps replicas apart is in the database: a nonce spent, a launch's one-time code spent and
    an outbox row claimed by many connections at the same moment go to exactly one of them."""
    from tests.test_rules_in_database import _at_once

    engine, now = db.engine(), lti._now()
    store.issue_nonce(engine, "n-1", "s-1", "iss", "client", now + timedelta(minutes=5), now)
    spent, errors = _at_once(8, lambda i: store.spend_nonce(engine, "n-1", "s-1", "iss", "client", now))
    assert not errors and sorted(spent) == [False] * 7 + [True], f"one launch spends the nonce: {spent} {errors}"
    store.hand_off(engine, "code-1", "the-session", now + lti.HANDOFF_TTL, now)
    taken, errors = _at_once(8, lambda i: store.take_handoff(engine, "code-1", now))
    assert not errors and sorted(map(str, taken)) == ["None"] * 7 + ["the-session"], f"one page spends a code: {taken}"
    store.hand_off(engine, "code-2", "the-session", now + lti.HANDOFF_TTL, now)
    assert store.take_handoff(engine, "code-2", now + lti.HANDOFF_TTL + timedelta(seconds=1)) is None, "expired"
    code = assignments.create("Claims", [{"kind": "scores", "level": 1, "count": 1}], seed=1).assignment.code
    store.queue_score(engine, code, "person-1", 0.75, now)
    claims, errors = _at_once(8, lambda i: store.claim_score(engine, code, "person-1", f"replica-{i}", now))
    assert not errors and len([c for c in claims if c is not None]) == 1, f"one replica claims the score: {errors}"


# ---------------------------------------------------------------- refusals (SQLite)


@pytest.fixture(scope="module")
def _course(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        tool = _tool(f"sqlite:///{tmp_path_factory.mktemp('lti') / 'lti.sqlite3'}", monkeypatch)
        platform, client = next(tool)
        yield platform, client, deep_link(client, platform)
        next(tool, None)


@pytest.fixture
def course(_course):
    """One course of one platform for the refusal tests (SQLite), each test starting with no cookies
    and no refused launches counted against it."""
    platform, client, code = _course
    client.cookies.clear()
    with writing(db.engine()).begin() as conn:
        conn.execute(sa.delete(throttles).where(throttles.c.form == "lti"))
    return platform, client, code


def refused(result, reason: str) -> None:
    status, text, _ = result
    assert status == 400 and reason in text, f"expected a refusal ({reason}), got {status}: {text[:200]}"


def test_a_replayed_nonce_is_refused(course):
    platform, client, code = course
    state, nonce = login(client, platform)
    token = platform.id_token(nonce, custom={"assignment": code})
    first = client.post("/lti/launch", data={"id_token": token, "state": state}, follow_redirects=False)
    assert landing(first)[1] == "/assignments", "the first launch goes through"
    client.cookies.set("lti_state", state, domain="tool.test", path="/lti/")
    again = client.post("/lti/launch", data={"id_token": token, "state": state}, follow_redirects=False)
    assert again.status_code == 400 and "nonce_replayed" in again.text


def test_a_wrong_audience_is_refused(course):
    platform, client, code = course
    refused(launch(client, platform, custom={"assignment": code}, aud="another-tool"), "unknown_platform")


def test_a_wrong_issuer_is_refused(course):
    platform, client, code = course
    refused(launch(client, platform, custom={"assignment": code}, iss="https://evil.example"), "unknown_platform")
    client.headers["Accept-Language"] = "zh-CN,zh;q=0.9"
    try:
        _, text, _ = launch(client, platform, custom={"assignment": code}, iss="https://evil.example")
    finally:
        del client.headers["Accept-Language"]
    assert "未能接受来自课程的这次启动" in text, "the refusal in the browser's language"


def test_an_unknown_kid_is_refused(course):
    platform, client, code = course
    refused(launch(client, platform, custom={"assignment": code}, kid="not-a-kid"), "unknown_kid")


def test_a_bad_signature_is_refused(course):
    platform, client, code = course
    _, other = new_key()  # signed with another key, under the platform's kid
    refused(launch(client, platform, custom={"assignment": code}, key=other), "bad_signature")


def test_an_unknown_deployment_is_refused(course):
    platform, client, code = course
    refused(launch(client, platform, custom={"assignment": code},
                   **{"https://purl.imsglobal.org/spec/lti/claim/deployment_id": "elsewhere"}), "unknown_deployment")


def test_an_expired_token_is_refused(course):
    platform, client, code = course
    refused(launch(client, platform, custom={"assignment": code}, exp=int(time.time()) - 3600,
                   iat=int(time.time()) - 7200), "expired")


def test_a_launch_without_the_login_state_is_refused(course):
    platform, client, code = course
    state, nonce = login(client, platform)
    client.cookies.clear()
    r = client.post("/lti/launch", data={"id_token": platform.id_token(nonce), "state": state}, follow_redirects=False)
    assert r.status_code == 400 and "state_mismatch" in r.text


def test_a_student_of_course_a_cannot_reach_course_b(course):
    platform, client, code_a = course
    code_b = deep_link(client, platform, context="course-B")
    refused(launch(client, platform, custom={"assignment": code_b}, context="course-A"), "other_course")
    _, _, query = launch(client, platform, custom={"assignment": code_a}, context="course-A")
    assert lti.learner_name(query["session"], code_b) is None, "course A's session opens nothing of course B"
    assert lti.learner_name(query["session"] + "x", code_a) is None, "an altered session opens nothing"


def test_a_learner_cannot_pose_as_an_instructor(course):
    platform, client, code = course
    refused(launch(client, platform, message_type="LtiDeepLinkingRequest"), "not_instructor")
    status, path, query = launch(client, platform, custom={"assignment": code})
    assert path == "/assignments" and lti.teacher_key(query["session"], code) is None, "a learner gets no teacher key"
    posing = client.post("/lti/deep_link", data={"lti": query["session"], "title": "x", "kind": "softmax",
                                                 "level": "1", "count": "1"})
    assert posing.status_code == 403, "a learner's session builds nothing"


def test_an_oversized_token_is_refused_and_refusals_are_throttled(course):
    platform, client, _ = course
    state, _ = login(client, platform)
    r = client.post("/lti/launch", data={"id_token": "x" * (lti.MAX_TOKEN + 1), "state": state})
    assert r.status_code == 400 and "bad_request" in r.text
    statuses = [client.post("/lti/launch", data={"id_token": "x", "state": "y"}).status_code for _ in range(6)]
    assert 429 in statuses, f"repeated refusals from one source wait: {statuses}"


def test_the_jwks_serves_the_current_and_previous_key_after_rotation(course):
    _, client, _ = course
    before = {k["kid"] for k in client.get("/lti/jwks").json()["keys"]}
    assert lti_cli.main(["rotate-key"]) == 0, "the command rotates the key"
    after = [k["kid"] for k in client.get("/lti/jwks").json()["keys"]]
    [(new, _)] = store.newest_keys(db.engine(), 1)
    assert after[0] == new and set(after[1:]) <= before and len(after) == 2, f"current and previous: {after}"
    assert new not in before and jwt.get_unverified_header(lti._sign({"x": 1}))["kid"] == new, "the new key signs"
    bad = ["register", "--issuer", "https://lms", "--client-id", "c", "--deployment", "d", "--token-url", "https://t",
           "--jwks-url", "https://j", "--auth-login-url", "file:///etc/passwd"]
    assert lti_cli.main(bad) == 2, "a registration with an address that is not http(s) is refused"


# ---------------------------------------------------------------- the pages take the launch


def test_the_pages_take_the_launched_learner_and_instructor(sqlite_tool, monkeypatch):
    """The learner submits on the Assignments page under their course identity (no name typed) and the
    score reaches the platform; the instructor opens the Gradebook page without a teacher key. The
    launch's address grants nothing on its own: its one-time code opens the page once (a second browser
    with the same address is a stranger), and the session is an HttpOnly cookie, never in an address."""
    from tests.test_assignments_pages import ASSIGNMENTS, GRADEBOOK, button, page, texts, type_answers
    from ui import lti as lti_ui

    platform, client = sqlite_tool
    code = deep_link(client, platform)
    _, _, query = launch(client, platform, sub="student-7", custom={"assignment": code})
    cookie = query["set-cookie"]
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {a.strip() for a in cookie.split(";")}, cookie
    assert "lti" not in query and query["session"] not in str(query["lti_code"]), "the address carries no session"
    client.base_url = "https://tool.test"  # over TLS: Secure, and a __Host- name no sibling site can plant
    secure = launch(client, platform, sub="student-7", custom={"assignment": code})[2]["set-cookie"]
    assert secure.startswith(f"__Host-{lti.SESSION_COOKIE}=") and "Secure" in secure.split("; "), secure
    client.base_url = "http://tool.test"
    address = {"assignment": code, "lti_code": query["lti_code"]}
    at = page(ASSIGNMENTS, address)
    signed_in = "Signed in from your course as **Learner student\\-7"
    assert not at.exception and signed_in in texts(at), texts(at)[:300]
    assert "lti_code" not in at.query_params, "the spent code leaves the address"
    assert not [w for w in at.text_input if w.key.startswith("assign.name_input")], "no name is typed"
    for other, what in ((address, "the same address in a second browser"),
                        ({"assignment": code, "lti": query["session"]}, "the session itself in an address")):
        stranger = page(ASSIGNMENTS, other)
        assert signed_in not in texts(stranger), f"{what} opens nothing"
        assert "Submit my answers" not in [b.label for b in stranger.button], f"{what}: nothing to submit"
    a = assignments.load(code)
    name, _ = lti.learner_name(query["session"], code)
    answers = [{p.name: selftest.as_text(p.reference) for p in ex.parts} for ex in submissions.exercises_for(a, name)]
    type_answers(at, a, name, answers)
    button(at, "Submit my answers").click().run()
    assert not at.exception
    wait_for(lambda: platform.scores, "the page's submission at the platform")
    assert platform.scores[-1][1]["userId"] == "student-7" and platform.scores[-1][1]["scoreGiven"] == 100.0
    _, _, teacher = launch(client, platform, sub="teacher-1", roles=(INSTRUCTOR,), custom={"assignment": code})
    book = page(GRADEBOOK, {"code": code, "lti_code": teacher["lti_code"]})
    assert not book.exception and "no teacher key needed" in texts(book)
    assert not [w for w in book.text_input if w.key == "gradebook.key"], "no key is asked for"
    # a later page load of the same browser: the launch's cookie (st.context.cookies), no code
    monkeypatch.setattr(lti_ui, "server_cookie", lambda name: teacher["session"] if name == lti.SESSION_COOKIE else None)
    dashboard = page(ASSIGNMENTS)
    assert not dashboard.exception and f"Week \\<3\\> · {code}" in [e.label for e in dashboard.expander], \
        "the instructor's cookie opens the course's assignment on the dashboard without a key"
    monkeypatch.setattr(lti_ui, "server_cookie", lambda name: query["session"] if name == lti.SESSION_COOKIE else None)
    learner_book = page(GRADEBOOK, {"code": code})
    assert [w for w in learner_book.text_input if w.key == "gradebook.key"], "a learner's launch opens no gradebook"


def test_the_roster_read_is_bounded(course, monkeypatch):
    platform, client, _ = course
    code = deep_link(client, platform)  # a class list of its own
    monkeypatch.setattr(lti, "MAX_ROSTER", 3)
    platform.members = [{"user_id": f"s{i}", "name": f"Learner {i}", "roles": [LEARNER]} for i in range(8)]
    launch(client, platform, sub="teacher-1", roles=(INSTRUCTOR,), custom={"assignment": code})
    wait_for(lambda: len(storage.roster_names(db.engine(), code)) == 3, "the first 3 members")
    time.sleep(0.3)  # a reader past the bound would add more now
    assert len(storage.roster_names(db.engine(), code)) == 3, "no more than MAX_ROSTER members are taken"


def test_an_instructor_links_an_assignment_made_before_with_its_teacher_key(course):
    platform, client, code_a = course
    made = assignments.create("Made in the app", [{"kind": "scores", "level": 1, "count": 1}], seed=3)
    _, _, query = launch(client, platform, sub="teacher-1", roles=(INSTRUCTOR,), message_type="LtiDeepLinkingRequest")
    wrong = client.post("/lti/deep_link", data={"lti": query["session"], "code": made.assignment.code, "key": "x" * 24})
    assert wrong.status_code == 400 and "do not match" in wrong.text, "a wrong key links nothing"
    right = client.post("/lti/deep_link", data={"lti": query["session"], "code": made.assignment.code,
                                                "key": made.teacher_key})
    answer = platform.read_deep_link(re.search(r'name="JWT" value="([^"]+)"', right.text).group(1))
    [item] = answer["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"]
    assert item["custom"] == {"assignment": made.assignment.code}, "the picked assignment is linked"
    _, _, other = launch(client, platform, sub="teacher-2", roles=(INSTRUCTOR,), context="course-B",
                         message_type="LtiDeepLinkingRequest")
    key_a = lti.teacher_key(launch(client, platform, sub="teacher-1", roles=(INSTRUCTOR,),
                                   custom={"assignment": code_a})[2]["session"], code_a)
    taken = client.post("/lti/deep_link", data={"lti": other["session"], "code": code_a, "key": key_a})
    assert taken.status_code == 400 and "linked_elsewhere" in taken.text, "course A's assignment stays course A's"
