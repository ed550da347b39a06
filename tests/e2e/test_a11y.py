"""axe-core (the engine behind Lighthouse's accessibility audit) on every page view, in both languages:
no serious or critical violation.

axe-core comes from npm (tests/a11y/package.json, installed by scripts/install_test_tools.sh with
`npm ci`); the test puts its script into each settled page and runs it there. Without it the test
skips on a developer machine and fails under CI. A violation that comes from Streamlit's own frontend
and that no theme or config can fix would go in UPSTREAM with its upstream issue; any other fails.

Each view is checked the moment it settles, and again after each change on Practice (a Check and a
hint rerun the answer form alone; the solution the page), so a fix that a script makes later is too late.

The views: Home, Practice (fresh, checked with a wrong answer, a hint open, solution open), Check my work, Progress,
the formula sheet, the assignment builder, an assignment as its student sees it, the gradebook with a
submission in it — at 1280 px, and Practice again at 390 px (a phone).
"""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import expect

import exercises
from exercises.cli import selftest
from exercises.i18n import t
from tests.e2e.conftest import REPO_ROOT
from tests.e2e.streamlit_driver import StreamlitPage
from ui.answer_grid import cell_key, paste_key
from ui.practice_state import answer_prefix

AXE = REPO_ROOT / "tests" / "a11y" / "node_modules" / "axe-core" / "axe.min.js"
SERIOUS = ("serious", "critical")
UPSTREAM: dict[str, str] = {}  # rule id → the upstream Streamlit issue that keeps it (none today)
PRACTICE = "/practice?kind=softmax&level=3&seed=103"
PHONE = {"width": 390, "height": 844}

_RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ' — ' + (n.failureSummary || '').slice(0, 200))}));
}"""


@pytest.fixture(scope="module")
def axe_script() -> str:
    if not AXE.is_file():
        reason = f"axe-core is not installed ({AXE.relative_to(REPO_ROOT)}; scripts/install_test_tools.sh runs npm ci)"
        if os.environ.get("CI"):
            pytest.fail(reason + " — required under CI", pytrace=False)
        pytest.skip(reason)
    return AXE.read_text()


def serious_violations(app: StreamlitPage, axe_script: str) -> list[dict]:
    """axe-core's serious and critical violations the moment the page has settled (no wait: whatever the
    page's script fixes must be fixed before anyone can look), less the named upstream ones."""
    app.settle()
    if not app.page.evaluate("() => typeof window.axe === 'object'"):
        app.page.add_script_tag(content=axe_script)
    found = app.page.evaluate(_RUN_AXE)
    return [v for v in found if v["impact"] in SERIOUS and v["id"] not in UPSTREAM]


def audit(app: StreamlitPage, axe_script: str, name: str, report: dict[str, list[dict]]) -> None:
    bad = serious_violations(app, axe_script)
    if bad:
        report[name] = bad


def fill_wrong(app: StreamlitPage, prefix: str, part: str, shape: tuple[int, int]) -> None:
    for i in range(shape[0]):
        for j in range(shape[1]):
            app.keyed(cell_key(prefix, part, i, j)).locator("input").fill("0.5")


def practice_views(app: StreamlitPage, axe_script: str, lang: str, report: dict[str, list[dict]]) -> None:
    app.open(f"{PRACTICE}&lang={lang}")
    audit(app, axe_script, f"practice ({lang})", report)
    from ui import cache

    ex = cache.exercise("softmax", 103, 3)
    prefix = answer_prefix(ex)
    fill_wrong(app, prefix, "A", (4, 4))
    app.rerun(lambda: app.button(t("practice.check", lang)).click())
    audit(app, axe_script, f"practice checked ({lang})", report)
    hint = t("hint.show", lang, level=1, name=t("hint.level.1", lang))
    app.page.locator('[data-testid="stExpander"] summary').filter(has_text=t("hint.title", lang)).click()
    app.rerun(lambda: app.button(hint).click())
    audit(app, axe_script, f"practice with a hint ({lang})", report)
    app.rerun(lambda: app.button(t("solution.show", lang)).click())
    audit(app, axe_script, f"practice with the solution ({lang})", report)


def stored_assignment(app_db, title: str) -> tuple[str, str]:
    """An assignment as the builder makes it by default (the first topic, its first level, one problem), stored
    in the server's database: (code, teacher key). The builder itself is test_teacher's."""
    import storage
    from exercises.teacher.assignments import make_spec
    from services.assignments import kind_versions
    from services.submissions import class_exercises

    kind = next(iter(exercises.KINDS))
    spec = make_spec(title, [{"kind": kind, "level": exercises.KINDS[kind].LEVELS[0], "count": 1}], 3)
    created = storage.create_assignment(app_db, spec.title, spec.items, spec.seed, spec.per_student,
                                        spec.allow_solutions, exercises=class_exercises(spec),
                                        kind_versions=kind_versions())
    return created.assignment.code, created.teacher_key


def classroom_views(people, app_db, axe_script: str, lang: str, report: dict[str, list[dict]]) -> None:
    from tests.e2e.test_classroom import exercises_of, slot_of

    code, key = stored_assignment(app_db, f"Axe {lang}")
    student = people()
    student.open(f"/assignments?assignment={code}&lang={lang}")
    student.keyed(f"assign.name_input.{code}").locator("input").fill("Ada")
    student.rerun(lambda: student.button(t("assign.start", lang)).click())
    audit(student, axe_script, f"assignment, student ({lang})", report)
    slot = slot_of(student)
    for index, ex in enumerate(exercises_of(app_db, code)):
        for part in ex.parts:
            area = student.keyed(paste_key(f"asg-{index}-{slot}", part.name)).locator("textarea")
            area.fill(selftest.as_text(part.reference))
    student.rerun(lambda: student.button(t("assign.submit", lang)).click())
    audit(student, axe_script, f"assignment submitted ({lang})", report)
    book = people()
    book.open(f"/gradebook?lang={lang}")
    book.keyed("gradebook.code").locator("input").fill(code)
    book.keyed("gradebook.key").locator("input").fill(key)
    book.rerun(lambda: book.button(t("gradebook.open", lang)).click())
    expect(book.page.get_by_role("heading", name=re.compile(code))).to_be_visible()
    audit(book, axe_script, f"gradebook with a submission ({lang})", report)


def describe(report: dict[str, list[dict]]) -> str:
    lines = []
    for view, violations in report.items():
        for v in violations:
            lines.append(f"{view}: {v['id']} ({v['impact']}) {v['help']}")
            lines.extend("    " + node for node in v["nodes"])
    return "\n".join(lines)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_serious_axe_violation_on_any_page(people, app_db, axe_script, lang) -> None:
    report: dict[str, list[dict]] = {}
    app = people()
    for path in ["/", "/check_work", "/progress", "/formulas", "/assignments", "/gradebook"]:
        app.open(f"{path}?lang={lang}")
        audit(app, axe_script, f"{path} ({lang})", report)
    practice_views(app, axe_script, lang, report)
    classroom_views(people, app_db, axe_script, lang, report)
    assert not report, "axe-core finds serious violations:\n" + describe(report)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_serious_axe_violation_on_a_phone(browser, site, axe_script, lang) -> None:
    context = browser.new_context(viewport=PHONE, locale="en-US", device_scale_factor=1)
    try:
        app = StreamlitPage(context.new_page(), site)
        report: dict[str, list[dict]] = {}
        for path in ["/?", "/formulas?"]:
            app.open(f"{path}lang={lang}")
            audit(app, axe_script, f"{path} at 390 px ({lang})", report)
        practice_views(app, axe_script, lang, report)  # Practice fresh, checked, with a hint and the solution
        assert not report, "axe-core finds serious violations on a phone:\n" + describe(report)
    finally:
        context.close()


def test_axe_finds_a_planted_violation(app: StreamlitPage, axe_script) -> None:
    """The check can fail: light grey text on white is reported."""
    app.open("/formulas")
    app.page.evaluate("""() => { const p = document.createElement('p'); p.textContent = 'faint';
      p.style.color = '#c8c8c8'; document.querySelector('[data-testid="stMain"]').prepend(p); }""")
    assert "color-contrast" in {v["id"] for v in serious_violations(app, axe_script)}


