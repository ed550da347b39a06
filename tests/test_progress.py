"""Progress: attempts are stored under each browser's private profile, survive a restart, and add up to
standings, a chart, the mistakes made most, mastery and what is due; Home shows the standing per stage.

A browser is simulated by the secret its cookie sends (ui.progress.browser_secret): AppTest has no
cookies, so a test that wants "the same browser again" hands the secret of an earlier session back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from streamlit.testing.v1 import AppTest

import exercises
import storage
from exercises.i18n import catalog
from services import profiles
from storage import profiles as store
from tests.apptest_helpers import ROOT, click_check, current_exercise, fill_cells, reference_cells
from tests.served_app import entrypoint_every_run  # noqa: F401  (fixture)
from ui import attempts as session_attempts
from ui import progress

pytestmark = pytest.mark.usefixtures("entrypoint_every_run")

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "progress.sqlite3"))
    engine = storage.open_engine()
    yield engine
    engine.dispose()


@pytest.fixture
def cookie(monkeypatch):
    """Set the secret the next AppTest's "browser" sends (None: a browser new to the app), and the
    browser's own id cookie (a profile secret files attempts only in the browser it was issued to)."""
    sent: dict[str, str | None] = {"secret": None, "browser": None}
    monkeypatch.setattr(progress, "browser_secret", lambda: sent["secret"])
    monkeypatch.setattr(progress, "browser_id", lambda: sent["browser"])
    return lambda secret, browser=None: sent.update(secret=secret, browser=browser)


def browser_profile() -> profiles.Opened:
    return profiles.open_browser(None)


def new_app() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)


def open_page(page: str, query: dict[str, str] | None = None) -> AppTest:
    at = new_app()
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def page_links(at: AppTest) -> list:
    return [e.proto for e in at.get("page_link")]


# ---------------------------------------------------------------- pure summaries


def test_every_misconception_has_a_short_name():
    from exercises.core.misconceptions import CATALOG
    missing = [m for m in CATALOG if f"progress.mistake.{m}" not in catalog("en")]
    assert missing == [], "add progress.mistake.<id> to exercises/i18n/locales/{en,zh}/home.json"
    assert progress.mistake_name("no_exp") == catalog("en")["progress.mistake.no_exp"]


def test_a_mistake_without_a_short_name_shows_its_explanation(monkeypatch):
    monkeypatch.setattr(progress, "catalog", lambda lang: {})
    assert progress.mistake_name("no_exp") == catalog("en")["misconception.no_exp"]


# ---------------------------------------------------------------- stored, shown, survives a restart


def test_attempts_survive_a_restart_and_show_on_progress(db, cookie):
    mine, theirs = browser_profile(), browser_profile()
    for i, (kind, score, mistake) in enumerate([("softmax", 0.25, "softmax_columns"), ("softmax", 0.5, "no_exp"),
                                                ("softmax", 0.25, "softmax_columns"), ("scores", 1.0, None)]):
        storage.record_attempt(db, mine.profile, kind, 2, 100 + i, score, mistake, 1, 42.0, T0 + timedelta(minutes=i))
    storage.record_attempt(db, theirs.profile, "masking", 1, 1, 0.0, "no_mask", 0, 10.0, T0)

    cookie(mine.secret, mine.browser)
    at = open_page("app_pages/progress.py")  # a fresh AppTest: a new process state, the same database
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[catalog("en")["progress.metric.attempts"]] == "4", "only this profile's attempts"
    assert metrics[catalog("en")["progress.metric.topics"]] == "2"
    assert metrics[catalog("en")["progress.metric.mean"]] == "50%"
    assert at.get("vega_lite_chart"), "the accuracy chart is drawn"
    table = at.dataframe[1].value
    assert sorted(table[catalog("en")["progress.col.attempts"]].tolist()) == [1, 3]
    labels = [e.label for e in at.expander]
    assert labels[0].startswith("2×") and catalog("en")["progress.mistake.softmax_columns"] in labels[0]
    assert not any(catalog("en")["progress.mistake.no_mask"] in label for label in labels)
    links = [p for p in page_links(at) if p.query_string]
    assert "kind=softmax&level=1" in [p.query_string for p in links], \
        "the failed card comes back first, one level easier (level 1 is not passed)"


def test_progress_shows_mastery_and_what_is_due(db, cookie):
    mine = browser_profile()
    storage.record_attempt(db, mine.profile, "projection", 1, 1, 1.0, None, 0, 200.0, T0)
    storage.record_attempt(db, mine.profile, "scores", 1, 1, 0.25, "transposed_scores", 0, 200.0, T0)
    cookie(mine.secret, mine.browser)
    at = open_page("app_pages/progress.py")
    en = catalog("en")
    mastery = at.dataframe[0].value
    assert mastery[en["progress.col.topic"]].tolist() == [en["kind.projection.title"], en["kind.scores.title"]]
    assert mastery[en["progress.col.due"]].tolist()[1] == en["progress.due_now"], "a lapse long ago is due"
    assert {en["progress.col.stability"], en["progress.col.recall"]} <= set(mastery.columns)
    captions = [c.value for c in at.caption]
    assert en["next.due"].format(count=2) in captions, "both cards are due months after T0"


def test_progress_without_attempts_points_to_practice(db):
    at = open_page("app_pages/progress.py")
    assert at.info and at.info[0].value == catalog("en")["progress.empty"], "no profile name is shown"
    assert any(p.query_string.startswith("kind=") for p in page_links(at))


def test_a_graded_attempt_on_practice_is_stored_then_shown_after_restart(db, cookie):
    at = open_page("app_pages/practice.py", {"kind": "scores", "level": "1", "seed": "3"})
    assert sum(1 for f in session_attempts.LISTENERS if f.__qualname__ == "on_attempt") == 1
    ex = current_exercise(at)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    assert not at.exception
    stored = storage.list_attempts(db, at.session_state["progress.profile"])
    assert [(a.kind, a.level, a.seed, a.score) for a in stored] == [("scores", 1, 3, 1.0)]
    assert stored[0].seconds >= 0 and stored[0].hints_used == 0 and stored[0].solution_shown is False

    cookie(at.session_state["progress.secret"], at.session_state["progress.browser"])
    home = new_app().run()  # restart, the same browser: Home reads the standing from the database
    captions = [c.value for c in home.caption]
    assert catalog("en")["home.standing"].format(attempts=1, best="100%", mean="100%") in captions
    progress_page = open_page("app_pages/progress.py")
    assert {m.label: m.value for m in progress_page.metric}[catalog("en")["progress.metric.attempts"]] == "1"

    cookie(None)
    other = open_page("app_pages/progress.py")  # another browser: nothing of the first one's
    assert other.info and not other.metric
    assert other.session_state["progress.profile"] != at.session_state["progress.profile"]


def test_an_attempt_on_practice_keeps_its_exercise_and_version(db):
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "8"})
    ex = current_exercise(at)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    (stored,) = storage.list_attempts(db, at.session_state["progress.profile"])
    assert stored.version == ex.version == exercises.KINDS["softmax"].VERSION
    assert stored.exercise == ex.to_dict() and exercises.Exercise.from_dict(stored.exercise) == ex


def test_a_new_browser_opens_the_private_profile_of_the_cookie_the_server_set(db, cookie):
    browser = profiles.new_secret()
    secret = profiles.cookie_for(None, browser)  # what the server's first page response set (ui/profile_cookie.py)
    cookie(secret, browser)
    first = new_app().run()
    assert not first.exception and not first.sidebar.text_input, "no profile name to type any more"
    assert first.session_state["progress.secret"] == secret and first.session_state["progress.browser"] == browser
    assert first.session_state["progress.profile"] == store.browser_of(db, secret)[0]
    assert not [h for h in first.get("html") if "cookie" in h.proto.body], "no script on the page writes a cookie"
    assert secret not in str(dict(first.query_params)), "the secret is never in the URL"
    assert first.session_state["progress.profile"] not in str(dict(first.query_params))

    again = new_app().run()  # the same browser, back: it keeps its profile
    assert again.session_state["progress.profile"] == first.session_state["progress.profile"]
    assert profiles.cookie_for(secret, browser) == secret, "and its cookie stays as it is"
    cookie(None)
    second = new_app().run()
    assert second.session_state["progress.profile"] != first.session_state["progress.profile"]


def test_a_fresh_profile_of_a_page_is_in_the_browsers_cookie_from_its_next_page_load(db, cookie):
    browser = profiles.new_secret()
    cookie("A" * 43, browser)  # a forged cookie opens nothing: the page makes a fresh profile
    at = new_app().run()
    fresh = at.session_state["progress.profile"]
    assert at.session_state["progress.secret"] != "A" * 43
    assert not [h for h in at.get("html") if "cookie" in h.proto.body], "no script on the page writes a cookie"
    handed = profiles.cookie_for("A" * 43, browser)  # the server, at the browser's next page load
    assert handed != "A" * 43 and store.browser_of(db, handed) == (fresh, profiles.browser_digest(browser))


def test_a_forged_cookie_opens_a_fresh_profile_with_a_message(db, cookie):
    someone = browser_profile()
    storage.record_attempt(db, someone.profile, "softmax", 1, 1, 1.0, None, 0, 5.0, T0)
    cookie("A" * 43)
    at = new_app().run()
    assert not at.exception
    assert at.warning and at.warning[0].value == catalog("en")["profile.notice.unknown_id"]
    assert at.session_state["progress.profile"] != someone.profile
    assert storage.list_attempts(db, at.session_state["progress.profile"]) == []
    assert at.session_state["progress.secret"] != "A" * 43, "and a new secret for the cookie"


def test_a_recovery_code_on_the_progress_page(db, cookie):
    home = browser_profile()
    storage.record_attempt(db, home.profile, "softmax", 1, 1, 1.0, None, 0, 5.0, T0)
    cookie(home.secret, home.browser)
    at = open_page("app_pages/progress.py")
    at.button(key="progress.data.make").click().run()
    (shown,) = [c.value for c in at.code]
    at.run()
    assert not at.code, "the code is shown once"

    cookie(None)
    other = open_page("app_pages/progress.py")
    other.text_input(key="progress.data.code").input("0000-0000-0000-0000-0000")
    other.button(key="progress.data.open").click().run()
    assert other.warning[0].value == catalog("en")["profile.notice.unknown_code"] and other.info, \
        "a wrong code: a clear message, and still this browser's own empty profile"
    other.text_input(key="progress.data.code").input(shown.lower())
    other.button(key="progress.data.open").click().run()
    assert not other.exception
    assert other.session_state["progress.profile"] == home.profile
    assert {m.label: m.value for m in other.metric}[catalog("en")["progress.metric.attempts"]] == "1"


def test_download_and_delete_all_my_data(db, cookie):
    mine = browser_profile()
    storage.record_attempt(db, mine.profile, "softmax", 1, 1, 1.0, None, 0, 5.0, T0)
    cookie(mine.secret, mine.browser)
    at = open_page("app_pages/progress.py")
    assert at.get("download_button"), "the learner can download their data"
    assert at.button(key="progress.data.delete").disabled, "not without the confirmation"
    at.checkbox(key="progress.data.confirm").check().run()
    at.button(key="progress.data.delete").click().run()
    assert not at.exception and at.info, "an empty profile now"
    assert storage.list_attempts(db, mine.profile) == []
    assert at.session_state["progress.profile"] != mine.profile
    assert profiles.open_browser(mine.secret).notice == "unknown_id", "the old cookie opens nothing"


def test_home_links_every_stage_with_its_standing(db, cookie):
    mine = browser_profile()
    storage.record_attempt(db, mine.profile, "softmax", 2, 1, 0.5, None, 0, 5.0, T0)
    storage.record_attempt(db, mine.profile, "softmax", 2, 2, 1.0, None, 0, 5.0, T0 + timedelta(minutes=1))
    cookie(mine.secret, mine.browser)
    at = new_app().run()
    assert not at.exception
    links = {p.query_string for p in page_links(at)}
    for kind in ("projection", "scores", "scaling", "masking", "softmax", "weighted_sum"):
        assert any(q.startswith(f"kind={kind}&") for q in links), kind
    assert "kind=softmax&level=2" in links, "a tried stage links at the learner's level"
    captions = [c.value for c in at.caption]
    assert catalog("en")["home.standing"].format(attempts=2, best="100%", mean="75%") in captions
    assert captions.count(catalog("en")["home.untried"]) >= len([k for k in exercises.KINDS if k != "softmax"]) - 1
    assert catalog("en")["next.due"].format(count=1) in captions, "Home shows what is due for review"


def test_home_up_next_starts_a_new_learner_at_the_beginning(db):
    at = new_app().run()
    en = catalog("en")
    first = list(exercises.KINDS)[0]
    assert any(en["next.start"].format(topic=en[f"kind.{first}.title"], level=1) in m.value for m in at.markdown)
    assert f"kind={first}&level=1" in {p.query_string for p in page_links(at)}


def test_home_costs_no_query_on_a_rerun(db, monkeypatch):
    at = new_app().run()
    calls = []
    original = storage.list_attempts
    monkeypatch.setattr(storage, "list_attempts", lambda *a, **k: calls.append(1) or original(*a, **k))
    at.run()
    at.sidebar.radio[0].set_value("zh").run()
    assert not at.exception and calls == [], "the standing is kept in the session until an attempt is stored"


def test_a_database_failure_does_not_break_practice(db, monkeypatch):
    import sqlalchemy as sa

    def broken(*args, **kwargs):
        raise sa.exc.OperationalError("INSERT", {}, Exception("disk I/O error"))

    at = open_page("app_pages/practice.py", {"kind": "scores", "level": "1", "seed": "5"})
    monkeypatch.setattr(storage, "record_attempt", broken)
    ex = current_exercise(at)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    assert not at.exception
    assert at.success, "the learner still gets the feedback"
    assert at.toast and catalog("en")["progress.not_saved"] in at.toast[0].value


def _listener_app():
    import streamlit as st

    from ui import progress as p
    st.session_state["progress.profile"] = "Lin"
    p.on_attempt({"kind": "softmax", "level": 2, "seed": 77, "score": 0.5, "correct": False,
                  "misconception": "no_exp", "hints_used": 2, "seconds": 12.5, "at": 1_800_000_000.0})
    p.on_attempt({"kind": "softmax", "level": 2, "seed": 78, "score": None, "hints_used": 0, "seconds": 1.0,
                  "at": 1_800_000_001.0})  # not graded: not stored
    st.write(f"version {st.session_state['progress.version']}")


def test_the_listener_stores_every_field_under_the_current_profile(db):
    at = AppTest.from_function(_listener_app).run()
    assert not at.exception
    assert at.markdown[0].value == "version 1", "a stored attempt makes the cached standings stale"
    (stored,) = storage.list_attempts(db, "Lin")
    assert (stored.kind, stored.level, stored.seed, stored.score, stored.misconception, stored.hints_used,
            stored.seconds) == ("softmax", 2, 77, 0.5, "no_exp", 2, 12.5)
    assert stored.at == datetime.fromtimestamp(1_800_000_000, UTC)


def test_the_attempts_chart_reads_topic_by_topic_in_attempt_order():
    """A session of checks seconds apart, then one a day later: each attempt its own square along its
    topic's row (not a vertical stroke on a time axis), topics in pipeline order, colour by score on one
    0–100 % scale (not a pastel per topic), the level written in each square."""
    from types import SimpleNamespace

    from ui.progress import SHOWN_PER_TOPIC, attempts_chart, topic_label

    start = datetime(2026, 3, 4, 10, 0, tzinfo=UTC)
    rows = [SimpleNamespace(kind=kind, level=level, score=score, at=start + timedelta(seconds=seconds),
                            seconds=5.0, misconception=None)
            for kind, level, score, seconds in [("softmax", 1, 0.0, 0), ("softmax", 1, 0.5, 20), ("scores", 2, 1.0, 40),
                                                ("softmax", 2, 1.0, 60), ("scores", 2, 1.0, 86_400)]]
    rows += [SimpleNamespace(kind="masking", level=1, score=1.0, at=start + timedelta(minutes=i), seconds=5.0,
                             misconception=None) for i in range(SHOWN_PER_TOPIC + 3)]
    spec = attempts_chart(rows).to_dict()
    squares, levels = spec["layer"]
    (data,) = spec["datasets"].values()
    case = "three topics, a session of checks then one a day later"
    assert squares["encoding"]["x"]["field"] == "number" and squares["encoding"]["x"]["type"] == "ordinal", case
    assert squares["encoding"]["color"]["field"] == "score", f"{case}: colour is the score, not the topic"
    assert squares["encoding"]["color"]["scale"]["domain"] == [0, 1], case
    assert levels["encoding"]["text"]["field"] == "level", case
    tried = [kind for kind in exercises.KINDS if kind in ("scores", "masking", "softmax")]
    assert squares["encoding"]["y"]["sort"] == [topic_label(k) for k in tried], f"{case}: pipeline order"
    softmax = [(r["number"], r["score"]) for r in data if r["topic"] == topic_label("softmax")]
    assert softmax == [(1, 0.0), (2, 0.5), (3, 1.0)], f"{case}: softmax's attempts, one square each"
    masking = sorted(r["number"] for r in data if r["topic"] == topic_label("masking"))
    assert masking == list(range(4, SHOWN_PER_TOPIC + 4)), f"{case}: the last {SHOWN_PER_TOPIC} of a topic"


def test_the_signed_in_user_is_the_profile(db):
    user = {"is_logged_in": True, "sub": "user-1", "iss": "https://accounts.example", "email": "ada@example.com"}
    at = new_app()
    at.user = dict(user)
    at.run()
    assert not at.exception
    assert at.session_state["progress.profile"] == profiles.login_profile_id(user["iss"], user["sub"])
    assert at.session_state["progress.secret"] is None, "no cookie needed: the account is the profile"
    elsewhere = new_app()
    elsewhere.user = dict(user)
    elsewhere.run()  # another browser, the same account
    assert elsewhere.session_state["progress.profile"] == at.session_state["progress.profile"]
    elsewhere.switch_page("app_pages/progress.py")
    elsewhere.run()
    assert catalog("en")["profile.where_login"] in [m.value for m in elsewhere.markdown]


def test_a_solution_opened_before_checking_is_stored_and_makes_the_review_a_lapse(db):
    from services import review

    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "5"})
    next(b for b in at.button if b.label == catalog("en")["solution.show"]).click().run()
    ex = current_exercise(at)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    (stored,) = storage.list_attempts(db, at.session_state["progress.profile"])
    assert stored.score == 1.0 and stored.solution_shown is True
    assert review.rating(stored) == review.AGAIN, "a copied answer is no recall"
    card = review.cards([stored])[("softmax", 2)]
    assert card.due - stored.at <= timedelta(minutes=10), "so it comes back soon"


def test_a_database_failure_when_opening_the_profile_is_a_message(db, monkeypatch):
    import sqlalchemy as sa

    from storage import profiles as store

    def broken(*args, **kwargs):
        raise sa.exc.OperationalError("INSERT", {}, Exception("disk I/O error"))

    monkeypatch.setattr(store, "create_profile", broken)
    at = new_app().run()
    assert not at.exception
    assert catalog("en")["profile.not_kept"] in [w.value for w in at.warning]
    assert at.session_state["progress.secret"] is None, "no cookie for a profile that was never stored"


def test_sign_out_other_browsers_on_progress_and_a_new_code_signs_them_out(db, cookie):
    """A browser that opened a profile with a recovery code kept access after a new code."""
    home = browser_profile()
    storage.record_attempt(db, home.profile, "softmax", 1, 1, 1.0, None, 0, 5.0, T0)
    code = profiles.new_recovery_code(home.profile, keep=home.secret)
    borrowed = profiles.open_with_code(code)
    cookie(borrowed.secret, borrowed.browser)
    elsewhere = open_page("app_pages/progress.py")  # the other browser, its page open
    assert elsewhere.session_state["progress.profile"] == home.profile
    cookie(home.secret, home.browser)
    at = open_page("app_pages/progress.py")
    at.button(key="progress.data.others").click().run()
    assert not at.exception and at.warning[0].value == catalog("en")["profile.notice.others_signed_out"]
    cookie(borrowed.secret, borrowed.browser)  # what the other browser still sends
    elsewhere.run()  # its next run: the profile is gone from it
    assert elsewhere.session_state["progress.profile"] != home.profile
    assert elsewhere.warning[0].value == catalog("en")["profile.notice.signed_out"]
    assert at.session_state["progress.profile"] == home.profile
    # and a new recovery code does the same
    again = profiles.open_with_code(code)
    cookie(again.secret, again.browser)
    third = open_page("app_pages/progress.py")
    cookie(home.secret, home.browser)
    at.button(key="progress.data.make").click().run()
    cookie(again.secret, again.browser)
    third.run()
    assert third.session_state["progress.profile"] != home.profile


def test_a_planted_cookie_asks_before_filing_practice_attempts(db, cookie):
    """A cookie planted in a victim's browser filed the victim's attempts in the planter's profile."""
    planter = browser_profile()
    victim = browser_profile()
    cookie(planter.secret, victim.browser)  # the planter's secret, in the victim's browser
    at = open_page("app_pages/practice.py", {"kind": "scores", "level": "1", "seed": "3"})
    assert at.session_state["progress.profile"] == planter.profile
    assert any(catalog("en")["profile.confirm_text"] == w.value for w in at.sidebar.warning)
    ex = current_exercise(at)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    assert not at.exception and storage.list_attempts(db, planter.profile) == [], "nothing filed unasked"
    at.sidebar.button(key="progress.confirm_no").click().run()  # not mine: a profile of its own
    mine = at.session_state["progress.profile"]
    assert mine != planter.profile and storage.list_attempts(db, planter.profile) == []
    assert [a.score for a in storage.list_attempts(db, mine)] == [1.0], "the held attempt is kept, in its own"
