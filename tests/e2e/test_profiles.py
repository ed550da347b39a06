"""Private profiles in a real browser: two browsers (contexts) get different profiles and never
see each other's attempts; a browser that comes back keeps its own; the secret is a cookie the server
sets (HttpOnly: no script on the page sees it), not in a URL; a forged cookie opens a fresh, empty
profile with a message; a recovery code opens a profile that the browser keeps after a reload."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from playwright.sync_api import expect

import storage
from exercises.i18n import t
from services import profiles
from storage import profiles as store
from tests.e2e.streamlit_driver import StreamlitPage


def profile_cookie(person: StreamlitPage) -> str:
    """The secret the server's page response put in this browser's cookie; no script on the page can
    read it (HttpOnly), and no script on the page writes a cookie."""
    found = [c for c in person.page.context.cookies() if c["name"] == profiles.COOKIE]
    assert len(found) == 1, person.page.context.cookies()
    cookie = found[0]
    assert cookie["sameSite"] == "Strict" and cookie["path"] == "/" and cookie["expires"] > time.time() + 300 * 86400
    assert cookie["httpOnly"], f"the profile cookie is readable by scripts: {cookie}"
    assert cookie["value"] not in person.page.evaluate("document.cookie"), "a script on the page sees the secret"
    scripts = person.page.evaluate("[...document.querySelectorAll('script, iframe')].map("
                                   "e => e.textContent + (e.srcdoc || '')).join('\\n')")
    assert "document.cookie" not in scripts, "a script on the page writes a cookie"
    return cookie["value"]


def attempts_metric(person: StreamlitPage):
    return person.page.locator('[data-testid="stMetric"]').filter(has_text=t("progress.metric.attempts"))


def test_two_browsers_get_their_own_profiles_and_a_returning_one_keeps_its_own(people, app_db) -> None:
    ada, bo = people(), people()
    ada.open("/")
    bo.open("/")
    ada_secret, bo_secret = profile_cookie(ada), profile_cookie(bo)
    assert ada_secret != bo_secret and profiles.well_formed_secret(ada_secret)
    assert ada_secret not in ada.page.url and bo_secret not in bo.page.url, "the secret is never in a URL"
    ada_profile = store.profile_for_secret(app_db, ada_secret, "browser")
    bo_profile = store.profile_for_secret(app_db, bo_secret, "browser")
    assert ada_profile and bo_profile and ada_profile != bo_profile
    assert ada_profile not in ada.page.content(), "the profile id is not in the page either"

    storage.record_attempt(app_db, ada_profile, "softmax", 1, 5, 0.75, None, 0, 60.0, datetime.now(UTC))

    ada.open("/progress")  # a new session of the same browser: its cookie opens its profile
    expect(attempts_metric(ada)).to_contain_text("1")
    assert profile_cookie(ada) == ada_secret, "a returning browser keeps its cookie"
    bo.open("/progress")
    expect(bo.page.get_by_text(t("progress.empty"))).to_be_visible()
    assert attempts_metric(bo).count() == 0, "nothing of the other browser's"
    assert store.profile_for_secret(app_db, profile_cookie(bo), "browser") == bo_profile


def test_a_forged_cookie_opens_a_fresh_profile_with_a_message(people, app_db, site) -> None:
    victim = store.create_profile(app_db, "browser", "V" * 43)
    storage.record_attempt(app_db, victim, "softmax", 1, 5, 1.0, None, 0, 60.0, datetime.now(UTC))
    mallory = people()
    mallory.page.context.add_cookies([{"name": profiles.COOKIE, "value": "A" * 43, "url": site}])
    mallory.open("/progress")
    expect(mallory.page.get_by_text(t("profile.notice.unknown_id"))).to_be_visible()
    expect(mallory.page.get_by_text(t("progress.empty"))).to_be_visible()
    mallory.open("/progress")  # the fresh profile is the browser's from its next page load on
    fresh = profile_cookie(mallory)
    assert fresh != "A" * 43 and store.profile_for_secret(app_db, fresh, "browser") not in (None, victim)
    expect(mallory.page.get_by_text(t("profile.notice.unknown_id"))).to_have_count(0)


def test_a_recovery_code_opens_the_profile_and_the_browser_keeps_it_after_a_reload(people, app_db) -> None:
    ada, bo = people(), people()
    ada.open("/progress")
    ada_profile = store.profile_for_secret(app_db, profile_cookie(ada), "browser")
    storage.record_attempt(app_db, ada_profile, "softmax", 1, 5, 0.75, None, 0, 60.0, datetime.now(UTC))
    ada.open("/progress")
    ada.page.get_by_text(t("profile.data_title")).click()  # an expander opens without a run
    ada.rerun(lambda: ada.button(t("profile.code_make")).click())
    code = ada.page.locator('[data-testid="stCode"]').inner_text().strip()
    assert profiles.clean_code(code), code

    bo.open("/progress")
    bo_secret = profile_cookie(bo)
    bo.page.get_by_text(t("profile.data_title")).click()
    code_box = bo.keyed("progress.data.code").locator("input")
    code_box.fill(code)
    bo.rerun(lambda: code_box.press("Enter"))
    bo.rerun(lambda: bo.button(t("profile.code_open")).click())
    expect(bo.page.get_by_text(t("profile.notice.opened"))).to_be_visible()
    bo.open("/progress")  # a new page load: the server hands the browser that profile's secret
    expect(attempts_metric(bo)).to_contain_text("1")
    kept = profile_cookie(bo)
    assert kept != bo_secret and store.profile_for_secret(app_db, kept, "browser") == ada_profile
