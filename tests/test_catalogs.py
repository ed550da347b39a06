"""The Chinese catalog mirrors the English one: same files, same keys, same placeholders."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import exercises
from exercises.i18n import catalog, languages, t
from tests.apptest_helpers import ROOT


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_catalogs", ROOT / "scripts" / "check_catalogs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


checker = _load_checker()


def test_chinese_is_a_language():
    assert {"en", "zh"} <= set(languages())


@pytest.mark.parametrize("lang", ["zh"])
def test_same_files_keys_and_placeholders(lang):
    reports = checker.compare(lang) + checker.compare_kinds(lang)
    assert reports, "no catalog files found"
    assert len(checker.compare_kinds(lang)) == len(exercises.KINDS), "every kind folder has its own texts"
    problems = checker.describe(lang, reports)
    assert not problems, "\n".join(problems)


def test_merged_catalogs_have_the_same_keys():
    en, zh = catalog("en"), catalog("zh")
    assert sorted(en.keys() - zh.keys()) == []
    assert sorted(zh.keys() - en.keys()) == []


def test_translations_are_not_english_copies():
    """A translated catalog whose text equals the English everywhere would pass the key test."""
    en, zh = catalog("en"), catalog("zh")
    cjk = [key for key, text in zh.items() if any("\u4e00" <= ch <= "\u9fff" for ch in text)]
    same = [key for key in en if zh.get(key) == en[key]]
    assert len(cjk) > 0.6 * len(zh), f"only {len(cjk)} of {len(zh)} Chinese texts contain Chinese"
    assert len(same) < 0.25 * len(en), f"{len(same)} texts are left in English"


def _write(folder: Path, name: str, entries: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(entries, ensure_ascii=False), encoding="utf-8")


def test_checker_finds_missing_extra_and_placeholder_mismatches(tmp_path):
    _write(tmp_path / "en", "a.json", {"x.one": "One {n}", "x.two": "Two", "x.three": "{a} and {b:.0%}"})
    _write(tmp_path / "en", "b.json", {"y.one": "Y"})
    _write(tmp_path / "zh", "a.json", {"x.one": "一 {m}", "x.three": "{b:.0%} 与 {a}", "x.four": "四"})
    _write(tmp_path / "zh", "c.json", {"z": "多余"})
    reports = {r.name: r for r in checker.compare("zh", tmp_path)}
    assert reports["a.json"].missing == ["x.two"]
    assert reports["a.json"].extra == ["x.four"]
    assert reports["a.json"].placeholders == {"x.one": (["n"], ["m"])}
    assert reports["b.json"].missing_file and reports["b.json"].missing == ["y.one"]
    assert reports["c.json"].extra_file
    assert len(checker.describe("zh", list(reports.values()))) == 5


def test_checker_compares_each_kind_folder_on_its_own(tmp_path):
    _write(tmp_path / "alpha" / "locales", "en.json", {"kind.alpha.title": "Alpha {n}", "kind.alpha.prompt": "Go"})
    _write(tmp_path / "alpha" / "locales", "zh.json", {"kind.alpha.title": "阿尔法 {m}"})
    _write(tmp_path / "beta" / "locales", "en.json", {"kind.beta.title": "Beta"})
    _write(tmp_path / "_shared" / "locales", "en.json", {"not.a.kind": "skipped"})
    reports = {r.name: r for r in checker.compare_kinds("zh", tmp_path)}
    assert set(reports) == {"kinds/alpha/locales/zh.json", "kinds/beta/locales/zh.json"}
    assert reports["kinds/alpha/locales/zh.json"].missing == ["kind.alpha.prompt"]
    assert reports["kinds/alpha/locales/zh.json"].placeholders == {"kind.alpha.title": (["n"], ["m"])}
    assert reports["kinds/beta/locales/zh.json"].missing_file
    lines = checker.describe("zh", list(reports.values()))
    assert "kinds/beta/locales/zh.json: file missing (1 keys to translate)" in lines


def test_kind_texts_live_in_the_kind_folder():
    """A kind's title, summary and prompt are in its own folder, not in the shared catalogs."""
    for lang in ("en", "zh"):
        shared = {key for path in (checker.LOCALES / lang).glob("*.json") for key in json.loads(path.read_text("utf-8"))}
        for kind_id in exercises.KINDS:
            own = json.loads((checker.KINDS / kind_id / "locales" / f"{lang}.json").read_text("utf-8"))
            for what in ("title", "summary", "prompt"):
                key = f"kind.{kind_id}.{what}"
                assert key in own and key not in shared, (lang, key)


def test_checker_passes_identical_catalogs_and_flags_bad_braces(tmp_path):
    _write(tmp_path / "en", "a.json", {"k": "{x} items", "l": "fine"})
    _write(tmp_path / "zh", "a.json", {"k": "{x} 项", "l": "坏 {"})
    (report,) = checker.compare("zh", tmp_path)
    assert report.malformed == ["l"] and not report.missing and not report.placeholders


def test_chinese_renders_with_parameters():
    text = t("feedback.correct", "zh", score="100%")
    assert "100%" in text and text != catalog("en")["feedback.correct"].format(score="100%")


def test_plural_picks_the_singular_for_one_and_both_forms_exist_in_every_language():
    from exercises.i18n import plural

    assert plural("gradebook.students", 1).render("en") == "1 student"
    assert plural("gradebook.students", 3).render("en") == "3 students"
    assert t("gradebook.summary", "en", students=plural("gradebook.students", 1),
             items=plural("gradebook.items", 1), created="today") == "1 student · 1 exercise · created today"
    for lang in languages():
        forms = {key.rsplit(".", 1)[0] for key in catalog(lang) if key.endswith((".one", ".other"))}
        for base in forms:
            if f"{base}.one" in catalog("en"):
                assert {f"{base}.one", f"{base}.other"} <= catalog(lang).keys(), (lang, base)
