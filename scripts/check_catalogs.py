"""Compare every translation catalog with the English one, file by file.

    python scripts/check_catalogs.py            # all languages; exit 1 when anything differs
    python scripts/check_catalogs.py --lang zh

The shared catalogs are exercises/i18n/locales/<lang>/*.json; each kind folder has its own,
exercises/kinds/<id>/locales/<lang>.json (reported as kinds/<id>/<lang>.json). Reports, per file:
files missing or extra, keys missing or extra, and keys whose placeholders ({name} fields) differ
between English and the translation.
"""

from __future__ import annotations

import argparse
import json
import string
import sys
from dataclasses import dataclass, field
from pathlib import Path

LOCALES = Path(__file__).resolve().parent.parent / "exercises" / "i18n" / "locales"
KINDS = Path(__file__).resolve().parent.parent / "exercises" / "kinds"
SOURCE = "en"


@dataclass
class FileReport:
    """What differs between one English file and its translation."""

    name: str
    missing_file: bool = False
    extra_file: bool = False
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    placeholders: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)  # key: (en, other)
    malformed: list[str] = field(default_factory=list)  # keys whose text is not a valid format string

    @property
    def ok(self) -> bool:
        return not (self.missing_file or self.extra_file or self.missing or self.extra
                    or self.placeholders or self.malformed)


def placeholders(text: str) -> set[str]:
    """The {name} fields of a str.format template ("{score:.0%}" → {"score"}); ValueError if malformed."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(text)
            if name is not None}


def _load(path: Path) -> dict[str, str]:
    return json.loads(path.read_text(encoding="utf-8"))


def compare(lang: str, locales: Path = LOCALES, source: str = SOURCE) -> list[FileReport]:
    """One report per file name found in either the source or the `lang` folder."""
    src_files = {p.name: p for p in sorted((locales / source).glob("*.json"))}
    dst_files = {p.name: p for p in sorted((locales / lang).glob("*.json"))}
    return _compare_files(src_files, dst_files)


def compare_kinds(lang: str, kinds: Path = KINDS, source: str = SOURCE) -> list[FileReport]:
    """One report per kind folder: its locales/<source>.json against its locales/<lang>.json."""
    src_files, dst_files = {}, {}
    for folder in sorted(p for p in kinds.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        name = f"kinds/{folder.name}/locales/{lang}.json"
        for files, code in ((src_files, source), (dst_files, lang)):
            path = folder / "locales" / f"{code}.json"
            if path.is_file():
                files[name] = path
    return _compare_files(src_files, dst_files)


def _compare_files(src_files: dict[str, Path], dst_files: dict[str, Path]) -> list[FileReport]:
    reports = []
    for name in sorted(src_files.keys() | dst_files.keys()):
        report = FileReport(name)
        if name not in dst_files:
            report.missing_file = True
            report.missing = sorted(_load(src_files[name]))
        elif name not in src_files:
            report.extra_file = True
            report.extra = sorted(_load(dst_files[name]))
        else:
            src, dst = _load(src_files[name]), _load(dst_files[name])
            report.missing = sorted(src.keys() - dst.keys())
            report.extra = sorted(dst.keys() - src.keys())
            for key in sorted(src.keys() & dst.keys()):
                try:
                    want, got = placeholders(src[key]), placeholders(dst[key])
                except ValueError:
                    report.malformed.append(key)
                    continue
                if want != got:
                    report.placeholders[key] = (sorted(want), sorted(got))
        reports.append(report)
    return reports


def catalog_keys(lang: str) -> set[str]:
    """Every key of one language: its shared files and every kind folder's file."""
    paths = list((LOCALES / lang).glob("*.json")) + list(KINDS.glob(f"*/locales/{lang}.json"))
    return {key for path in paths for key in _load(path)}


def translations(locales: Path = LOCALES, source: str = SOURCE) -> list[str]:
    return sorted(p.name for p in locales.iterdir() if p.is_dir() and p.name != source)


def describe(lang: str, reports: list[FileReport]) -> list[str]:
    """Readable lines for the reports that are not ok."""
    lines = []
    for r in reports:
        if r.ok:
            continue
        where = r.name if r.name.startswith("kinds/") else f"{lang}/{r.name}"
        if r.missing_file:
            lines.append(f"{where}: file missing ({len(r.missing)} keys to translate)")
        if r.extra_file:
            lines.append(f"{where}: no English file of that name")
        lines += [f"{where}: missing key {key}" for key in ([] if r.missing_file else r.missing)]
        lines += [f"{where}: extra key {key}" for key in ([] if r.extra_file else r.extra)]
        lines += [f"{where}: {key}: placeholders {want} in English but {got} here"
                  for key, (want, got) in r.placeholders.items()]
        lines += [f"{where}: {key}: unbalanced braces" for key in r.malformed]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", action="append", help="language folder to check (default: all)")
    parser.add_argument("--missing-only", action="store_true", help="list only the missing keys, one per line")
    args = parser.parse_args(argv)
    problems = 0
    for lang in args.lang or translations():
        reports = compare(lang) + compare_kinds(lang)
        if args.missing_only:
            for r in reports:
                for key in r.missing:
                    print(f"{lang}/{r.name}\t{key}")
            problems += sum(len(r.missing) for r in reports)
            continue
        lines = describe(lang, reports)
        problems += len(lines)
        for line in lines:
            print(line)
        keys = len(catalog_keys(SOURCE))
        print(f"{lang}: {len(reports)} files, {keys} English keys, {len(lines)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
