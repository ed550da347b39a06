"""Hostile text everywhere: every value from a URL or the database is shown literally,
and every database failure is a clear message, never a traceback.

The corpus goes into every query parameter of every page and into every stored text field
(assignment title, student name, profile). An element that renders Markdown (title, markdown,
caption, error, warning, info, success, toast) must carry it escaped (exercises.i18n.escape.markdown):
no link, image, KaTeX, HTML or directive can come out of it, and once the escapes are read the raw
text is there. tests/e2e/test_hostile.py checks the same in a browser, on the rendered page.
"""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

import storage
from exercises.i18n import escape
from services import assignments as service
from tests.apptest_helpers import ROOT, open_page

PAGES = ["app_pages/home.py", "app_pages/practice.py", "app_pages/check_work.py", "app_pages/progress.py",
         "app_pages/formulas.py", "app_pages/assignments.py", "app_pages/gradebook.py"]
PARAMS = ["assignment", "kind", "level", "seed", "lang", "code"]

LINK = "[Log in here](https://evil.example/x)"
IMAGE = "![p](http://127.0.0.1:9/p.png)"
KATEX = r"$\kern-60em\rule{99em}{9em}$"
HTML = '<img src="http://127.0.0.1:9/h.png" onerror="alert(1)">'
DIRECTIVE = ":red[**loud**] :material/warning: `code`"
CORPUS = [LINK, IMAGE, KATEX, HTML, DIRECTIVE, "*a* _b_ ~~c~~ # d", "www.evil.example/auto", "=HYPERLINK(\"x\")"]
# what must never reach an element unescaped: each is active Markdown, KaTeX or HTML
ACTIVE = ["](", "![", "$\\", "<img", ":red[", ":material/", "`code`", "~~c~~", "*a*", "www.evil", "evil.example",
          "127.0.0.1"]
MARKDOWN_ELEMENTS = ("title", "header", "subheader", "markdown", "caption", "error", "warning", "info", "success",
                     "toast")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
# GFM links these by itself, reading through backslash escapes: they must never be in the text read
LINKIFIED = re.compile(r"(?i)https?://|www\.|\w@\w")


def shown(at: AppTest) -> list[str]:
    values = []
    for kind in MARKDOWN_ELEMENTS:
        values += [str(getattr(e, "value", "")) for e in at.get(kind)]
    values += [str(getattr(e, "label", "")) for e in at.expander]  # (at.get("expandable") finds none)
    return values


def unescaped(value: str) -> str:
    """What a reader sees of Markdown source: each backslash escape read as its character."""
    return _ESCAPE.sub(r"\1", value).replace(escape.WORD_JOINER, "")


def active(value: str) -> str:
    """The Markdown source with every escaped character blanked out: what the renderer may act on."""
    return _ESCAPE.sub("\x00", value)


def assert_literal(at: AppTest, hostile: str | None = None, echoed: int = 0) -> None:
    """Nothing active in any Markdown element; with `echoed`, the first `echoed` characters of
    `hostile` are shown (escaped, so the reader sees them as typed)."""
    assert not at.exception, [e.message for e in at.exception]
    values = shown(at)
    for value in values:
        for piece in ACTIVE:
            assert piece not in active(value), f"{piece!r} unescaped in {value!r}"
        assert not LINKIFIED.search(_ESCAPE.sub(r"\1", value)), f"a bare link in {value!r}"
    if hostile is not None and echoed:
        assert any(hostile[:echoed] in unescaped(v) for v in values), (hostile, values)


@pytest.fixture(autouse=True)
def db(fresh_sqlite):
    return fresh_sqlite


# ---------------------------------------------------------------- the escaping rule itself


@pytest.mark.parametrize("text", CORPUS)
def test_markdown_escape_leaves_nothing_active_and_reads_back_as_typed(text):
    out = escape.markdown(text)
    for piece in ACTIVE:
        assert piece not in active(out)
    assert not LINKIFIED.search(_ESCAPE.sub(r"\1", out))
    assert unescaped(out) == text


def test_each_target_has_its_escape():
    assert escape.latex_text(r"a_b {c} $d$ \e") == r"a\_b \{c\} \$d\$ \textbackslash{}e"
    assert escape.html('<a href="x">&</a>') == "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
    assert escape.csv("=1+1") == "'=1+1" and escape.csv("@x") == "'@x" and escape.csv("Ada") == "Ada"
    assert escape.csv(0.5) == 0.5
    assert escape.typst('a"b\\c #x') == '"a\\"b\\\\c #x"'
    assert escape.markdown("a\nb\r\x00c") == "a bc"


def test_only_untrusted_parameters_are_escaped():
    from exercises.i18n import msg
    m = escape.escape_params(msg("assign.created", title=escape.untrusted("**x**")))
    assert m.render("en") == "“\\*\\*x\\*\\*” is ready."
    assert escape.escape_params(msg("assign.created", title="**x**")).render("en") == "“**x**” is ready."
    nested = escape.distrust(msg("grade.invalid", inner=msg("assign.created", title="[a](b)")))
    assert isinstance(nested.params["inner"].params["title"], escape.Untrusted)


# ---------------------------------------------------------------- every query parameter of every page


@pytest.mark.parametrize("hostile", CORPUS[:5])
@pytest.mark.parametrize("page", PAGES)
def test_hostile_query_parameters_are_shown_literally(page, hostile):
    at = open_page(page, {name: hostile for name in PARAMS})
    assert_literal(at)


@pytest.mark.parametrize("hostile", [LINK, IMAGE, KATEX])
@pytest.mark.parametrize("param, limit", [("kind", 40), ("level", 20), ("seed", 30)])
def test_practice_echoes_a_bad_parameter_literally(param, limit, hostile):
    at = open_page("app_pages/practice.py", {param: hostile})
    assert_literal(at, hostile, echoed=min(limit, len(hostile)))


@pytest.mark.parametrize("hostile", [LINK, IMAGE, KATEX, HTML])
def test_a_hostile_share_code_is_echoed_literally(hostile):
    at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    at.query_params["assignment"] = hostile
    at.run()
    assert_literal(at, hostile, echoed=min(40, len(hostile)))


# ---------------------------------------------------------------- every stored text field

STORED = [LINK, IMAGE, KATEX, HTML, DIRECTIVE]


@pytest.mark.parametrize("hostile", STORED)
def test_a_hostile_title_and_student_name_are_shown_literally(db, hostile):
    created = service.create(hostile, [{"kind": "scores", "level": 1, "count": 1}], 3)
    code = created.assignment.code
    # the student's page: the title as the page's title, the name in "Working as"
    at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    at.query_params["assignment"] = code
    at.session_state[f"assign.student.{code}"] = hostile
    at.run()
    assert_literal(at, hostile, echoed=len(hostile))
    assert at.title[0].value == escape.markdown(hostile)
    # the gradebook: the title in its heading, the name in the table and the CSV
    storage.record_submission(db, code, hostile, 0, "scores", 1, 3, {"scores": "1"}, 1.0, None)
    storage.record_submission(db, code, "=HYPERLINK(\"http://evil.example\")", 0, "scores", 1, 3, {"scores": "1"},
                              1.0, None)
    book = AppTest.from_file(str(ROOT / "app_pages" / "gradebook.py"), default_timeout=60)
    book.session_state["gradebook.auth"] = (code, created.teacher_key)
    book.run()
    assert_literal(book, hostile, echoed=len(hostile))
    names = book.dataframe[0].value.iloc[:, 0].tolist()
    assert hostile in names  # a table shows text as text
    from services import gradebook as gb
    from ui.gradebook import table
    frame = table(gb.load(code, created.teacher_key)).map(escape.csv)
    csv_text = gb.csv_bytes(frame).decode("utf-8-sig")
    assert "'=HYPERLINK" in csv_text and "\n=HYPERLINK" not in csv_text


def test_the_teachers_own_page_shows_a_hostile_title_literally():
    at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60).run()
    at.text_input(key="assign.title").input(LINK)
    next(b for b in at.button if b.label == "Create assignment").click().run()
    assert_literal(at, LINK, echoed=len(LINK))


@pytest.mark.parametrize("hostile", STORED)
def test_a_hostile_profile_cookie_or_recovery_code_is_never_shown(db, hostile, monkeypatch):
    # profiles are private: no name is typed or shown; what a visitor controls is the cookie
    # the browser sends and a recovery code typed on Progress. Either opens nothing and is not echoed.
    from ui import progress as ui_progress
    monkeypatch.setattr(ui_progress, "browser_secret", lambda: hostile)
    at = open_page("app_pages/progress.py")
    assert_literal(at)
    assert not any(hostile in unescaped(v) for v in shown(at))
    assert at.session_state["progress.profile"] != hostile
    at.text_input(key="progress.data.code").input(hostile[:40])
    at.button(key="progress.data.open").click().run()
    assert_literal(at)
    assert not any(hostile[:40] in unescaped(v) for v in shown(at))


def test_a_hostile_class_list_is_refused_or_echoed_literally(db):
    created = service.create("PDFs", [{"kind": "scores", "level": 1, "count": 1}], 3, per_student=True)
    at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    at.session_state["assign.created"] = {"code": created.assignment.code, "title": LINK, "key": None,
                                          "assignment": created.assignment}
    at.run()
    at.text_area(key=f"assign.students.{created.assignment.code}").input(f"{LINK}\n{LINK.upper()}").run()
    assert_literal(at, LINK, echoed=len(LINK))  # "… appears twice": the names literally


# ---------------------------------------------------------------- every database failure is a message


def _broken_sqlite(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", "/etc/hostname/x.sqlite3")  # a folder that is a file


def _unreachable_postgres(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody:secret@127.0.0.1:1/none")


BROKEN = {"sqlite-under-a-file": _broken_sqlite, "postgres-unreachable": _unreachable_postgres}
TRACEBACK_WORDS = ("Traceback", "Error:", "/etc/hostname", "127.0.0.1:1", "psycopg", "sqlalchemy")


def assert_clear(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]
    for value in shown(at):
        for word in TRACEBACK_WORDS:
            assert word not in value, value


@pytest.mark.parametrize("broken", BROKEN)
@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_without_its_database(monkeypatch, page, broken):
    BROKEN[broken](monkeypatch)
    query = {"assignment": "K7QMX2PD"} if page.endswith("assignments.py") else None
    at = open_page(page, query)
    assert_clear(at)
    if page.endswith("assignments.py"):
        assert "database could not be reached" in " ".join(e.value for e in at.error)


@pytest.mark.parametrize("broken", BROKEN)
def test_creating_opening_and_grading_without_the_database_say_so(monkeypatch, broken):
    BROKEN[broken](monkeypatch)
    at = open_page("app_pages/assignments.py")
    at.text_input(key="assign.title").input("Week 1")
    next(b for b in at.button if b.label == "Create assignment").click().run()
    assert_clear(at)
    assert any("database could not be reached" in e.value for e in at.error)
    book = open_page("app_pages/gradebook.py")
    book.text_input(key="gradebook.code").input("K7QMX2PD")
    book.text_input(key="gradebook.key").input("x" * 30)
    next(b for b in book.button if b.label == "Open gradebook").click().run()
    assert_clear(book)
    assert any("database could not be reached" in e.value for e in book.error)
    book.session_state["gradebook.auth"] = ("K7QMX2PD", "x" * 30)
    book.run()
    assert_clear(book)


@pytest.mark.parametrize("broken", BROKEN)
def test_a_student_submitting_without_the_database_is_told(db, monkeypatch, broken):
    created = service.create("Week 1", [{"kind": "concepts", "level": 1, "count": 1}], 3)
    a = created.assignment
    at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    at.query_params["assignment"] = a.code
    at.session_state[f"assign.student.{a.code}"] = "Ada"
    at.run()
    assert not at.exception
    BROKEN[broken](monkeypatch)
    at.checkbox(key=f"assign.allow_blank.{a.code}").check()
    next(b for b in at.button if b.label == "Submit my answers").click().run()
    assert_clear(at)


def test_postgres_gets_a_connect_timeout(monkeypatch):
    import storage.db as sdb
    seen = {}

    def fake(url, **kwargs):
        seen.update(kwargs)
        raise RuntimeError("stop")

    monkeypatch.setattr(sdb.sa, "create_engine", fake)
    with pytest.raises(RuntimeError):
        storage.open_engine("postgresql://u:p@127.0.0.1:1/x")
    assert seen["connect_args"] == {"connect_timeout": sdb.CONNECT_TIMEOUT_S}
    with pytest.raises(RuntimeError):
        storage.open_engine("postgresql://u:p@127.0.0.1:1/x?connect_timeout=2")
    assert seen["connect_args"] == {}


# ---------------------------------------------------------------- stored text on every page that shows it

MARKUP = ["[Log in](https://evil.example/x)", '<a href="https://evil.example/x">Log in</a>',
          "<b>bold</b><script>alert(1)</script>", r"$\frac{1}{0}$ and $$x^2$$", "**bold** __under__ ~~gone~~",
          "`tick` ```fence```", "line one\nline two\n# heading", "Ada\uffffLovelace \\*x\\*",
          "Ze\u200bro\u200dwidth\u2060\ufeff* item"]
# what the renderer would act on, were any of them left unescaped
INERT = ["](https://evil", "<a href", "<b>bold", "<script", "$\\frac", "$$x", "**bold**", "__under__", "~~gone~~",
         "`tick`", "```fence", "* item"]


def assert_inert(at: AppTest, shows: str | None = None) -> None:
    """No Markdown element (nor an expander's label) acts on the corpus; `shows` is read back as stored."""
    assert not at.exception, [e.message for e in at.exception]
    values = shown(at)
    for value in values:
        for piece in INERT:
            assert piece not in active(value), f"{piece!r} active in {value!r}"
        assert not LINKIFIED.search(_ESCAPE.sub(r"\1", value)), f"a bare link in {value!r}"
    if shows is not None:
        one_line = " ".join(shows.split("\n")).replace(escape.WORD_JOINER, "")  # unescaped() drops joiners
        assert any(one_line in unescaped(v) for v in values), (shows, values)


@pytest.mark.parametrize("hostile", MARKUP, ids=range(len(MARKUP)))
def test_stored_text_is_escaped_on_every_page_that_shows_it(db, hostile):
    """Class-list names on the student's page, the gradebook's "Not submitted yet", titles in the
    dashboard's expanders (16 raw renders in 25 views), and the rest: each page that shows an
    assignment's title, a class-list name or a typed name shows it as text."""
    name = " ".join(hostile.replace("\n", " ").split())  # a class list has one name a line
    created = service.create(hostile, [{"kind": "scores", "level": 1, "count": 1}], 3, per_student=True)
    a, key = created.assignment, created.teacher_key
    links = service.set_roster(a, key, f"{name}\nBob")
    title = a.title  # as stored (NFKC, spaces collapsed)

    # the student's page, opened with the personal link: the title, "Working as" the class-list name
    at = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    at.query_params["assignment"] = a.code
    at.query_params["t"] = links[name]
    at.run()
    assert_inert(at, name)
    assert at.title[0].value == escape.markdown(title)

    # the gradebook: its heading, and "Not submitted yet" with the class list's names (once one has)
    storage.record_submission(db, a.code, "Bob", 0, "scores", 1, 3, {"scores": "1"}, 1.0, None)
    book = AppTest.from_file(str(ROOT / "app_pages" / "gradebook.py"), default_timeout=60)
    book.session_state["gradebook.auth"] = (a.code, key)
    book.run()
    assert_inert(book, name)
    assert_inert(book, title)
    assert any(name.replace(escape.WORD_JOINER, "") in unescaped(w.value) for w in book.warning)

    # the teacher's dashboard: the title on its expander; a class list naming one student twice
    dash = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    dash.session_state["assign.dash"] = key
    dash.run()
    assert_inert(dash, title)
    assert any(escape.markdown(title) in e.label for e in dash.expander)
    dash.text_area(key=f"assign.roster_text.{a.code}").input(f"{name}\n{name.upper()}")
    next(b for b in dash.button if b.label == "Issue personal links").click().run()
    assert_inert(dash)
    assert any(name.replace(escape.WORD_JOINER, "") in unescaped(e.value) for e in dash.error)  # "… twice"
    dash.text_area(key=f"assign.roster_text.{a.code}").input(f"{name}\nBob")
    next(b for b in dash.button if b.label == "Issue personal links").click().run()
    (links,) = dash.table  # st.table renders Markdown in its cells
    assert links.value.iloc[:, 0].tolist() == [escape.markdown(name), "Bob"]
    typed = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    typed.session_state["assign.created"] = {"code": a.code, "title": title, "key": None, "assignment": a}
    typed.run()
    assert_inert(typed, title)

    # an open assignment (no class list): the typed name in "Working as"
    open_one = service.create(hostile, [{"kind": "scores", "level": 1, "count": 1}], 3).assignment
    student = AppTest.from_file(str(ROOT / "app_pages" / "assignments.py"), default_timeout=60)
    student.query_params["assignment"] = open_one.code
    student.session_state[f"assign.student.{open_one.code}"] = name
    student.run()
    assert_inert(student, name)
