"""The kind registry and the deterministic generator.

A kind is a folder ``exercises/kinds/<id>/`` whose ``__init__.py`` has this surface, read once at
discovery into a `Kind` (so no caller looks a hook up by name):

    ID: str            the kind id of DESIGN §3.3
    ORDER: int         where it sits in menus (default 1000)
    VERSION: int       bump when generated exercises change
    LEVELS: tuple      the levels it offers
    GUARDS: tuple      the step records' mistakes the sampler keeps apart from the answer (and each other)
    MISTAKES: tuple    optional: the kind's own catalogued mistakes (not the records'), each explained in its
                       locales as misconception.<id>; engine.mistake_ids() is the one list of every id
    draw(rng, level) -> sampler.Batch: candidates stacked, or generate(rng, level) -> Draft: one at a time
    optional: solve(ex), aids(ex), diagnose(ex, part, value), explain(ex, part, value), hints(ex),
              prompt_keys(ex) -> the catalog keys of its prompt, HOME (a HomeStage), SHEET (a SheetSection),
              chain(ex, values, rounding) -> {name: value}: every value computable from the given data
              and the learner's `values`, each computed one rounded half-up to `rounding` places (None:
              exact); the grader's carry-forward. Default: the step pipeline over ex.given + values
              operations(ex) -> an exercises.core.budget.Operations (the hand work of a kind the pipeline
              does not run; by default exercises.core.budget counts it from the step registry)
              STATED: tuple and stated_params(given, stated) -> params: the numbers beyond the given data a
              learner states to check their own work (a model's layers and heads), and the prompt's
              params they make with the given data (check my work builds the learner's exercise: its
              chain and diagnose read from ex.params only what stated_params makes, and no part references)
              RENAMED: {old name: its name now} of given values an earlier VERSION stored under another name
              (read back under the new one: model.Exercise.from_dict)
              CONVENTIONS: {flag: the given value it fills in, or None}: flags a learner may set on their
              own numbers (RoPE's pairs from the halves, positions from 1), DEFAULTED: the given values
              the chain fills in by convention when none are typed

Its texts are in ``locales/<lang>.json`` beside it (exercises.i18n merges them). Folders whose name
starts with ``_`` (``_shared``) are not kinds.

Randomness only comes from the injected generator, seeded from (kind, seed, level), so the same
triple gives the same exercise in any process on any machine.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .. import i18n
from . import budget, misconceptions, model, pipeline, sampler
from .contract import Formula, HomeStage, SheetSection
from .draft import Draft
from .model import Exercise, Part

KINDS_PACKAGE = "exercises.kinds"  # where discovery finds the kind folders
MAX_SEED = 2**53  # seeds travel through URLs and JSON: keep them exact in JavaScript too
MAX_REDRAWS = 200
DEFAULT_ORDER = 1000

__all__ = ["KINDS", "Formula", "HomeStage", "Kind", "SheetSection", "added_kinds", "discover", "generate",
           "prompt", "rng_for", "validate"]


def default_prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """One prompt for every exercise of the kind: kind.<id>.prompt."""
    return (f"kind.{ex.kind}.prompt",)


def default_chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """The step pipeline run over the exercise's given data and the learner's `values`, for exercises
    whose every part is a pipeline step (the others, such as shapes, have nothing to carry forward)."""
    if not all(name in pipeline.STEP_BY_NAME for name in ex.part_names):
        return {}
    return dict(pipeline.run({**ex.given, **values}, rounding=rounding))


@dataclass(eq=False)
class Kind:
    """One kind's contract, resolved from its folder once at discovery. Optional hooks are None when
    the kind leaves them to the generic walk (solutions, hints, misconceptions).

    Not frozen only so that tests can monkeypatch a hook; nothing in the code writes to it."""

    ID: str
    VERSION: int
    LEVELS: tuple[int, ...]
    GUARDS: tuple[str, ...]
    generate: Callable[[np.random.Generator, int], Draft] | None
    ORDER: int = DEFAULT_ORDER
    draw: Callable[[np.random.Generator, int], Any] | None = None  # -> sampler.Batch
    MISTAKES: tuple[str, ...] = ()  # its own catalogued mistakes
    solve: Callable[[Exercise], list] | None = None
    aids: Callable[[Exercise], Any] | None = None
    diagnose: Callable[[Exercise, Part, np.ndarray], str | None] | None = None
    # a mistake that gives another shape (a cache not appended: t rows for t + 1), named beside the shape error
    diagnose_shape: Callable[[Exercise, Part, np.ndarray], str | None] | None = None
    explain: Callable[[Exercise, Part, np.ndarray], i18n.Msg | None] | None = None
    hints: Callable[[Exercise], list] | None = None
    prompt_keys: Callable[[Exercise], Sequence[str]] = default_prompt_keys
    chain: Callable[[Exercise, dict, int | None], dict] = default_chain
    operations: Callable[[Exercise], Any] | None = None  # -> exercises.core.budget.Operations
    STATED: tuple[str, ...] = ()  # numbers a learner states beside the given data (check my work)
    stated_params: Callable[[dict, dict], dict] | None = None  # (given, stated) -> the exercise's params
    CONVENTIONS: Mapping[str, str | None] = field(default_factory=dict)  # flag -> the given it fills in
    DEFAULTED: tuple[str, ...] = ()  # given values the chain fills in by convention when not typed
    home: HomeStage | None = None
    sheet: SheetSection | None = None
    folder: Path | None = None
    # how a given list is shown: {name: "from_one" (stored 0-based, shown from 1) or "degrees" (angles)}
    given_shown: Mapping[str, str] = field(default_factory=dict)
    EXP_GRID: Mapping[int, tuple] = field(default_factory=dict)  # level -> the fixed eˣ aid (ExpSeries, …)
    RENAMED: Mapping[str, str] = field(default_factory=dict)  # old given name -> its name now

    @classmethod
    def from_module(cls, module: ModuleType) -> Kind:
        """The contract of a kind module; TypeError naming what is missing or mistyped."""
        names = vars(module)
        missing = [n for n in ("ID", "VERSION", "LEVELS", "GUARDS") if n not in names]
        if "generate" not in names and "draw" not in names:
            missing.append("draw or generate")
        if missing:
            raise TypeError(f"kind module {module.__name__} lacks {', '.join(missing)}")
        unknown = sorted(set(names["GUARDS"]) - set(misconceptions.CATALOG))
        if unknown:
            raise TypeError(f"kind {names['ID']}: GUARDS names mistakes not in the catalog: {', '.join(unknown)}")
        records = sorted(set(names.get("MISTAKES", ())) & set(misconceptions.CATALOG))
        if records:
            raise TypeError(f"kind {names['ID']}: MISTAKES names mistakes of the step records: {', '.join(records)}")
        hooks = {n: names[n] for n in ("solve", "aids", "diagnose", "diagnose_shape", "explain", "hints", "prompt_keys",
                                       "chain", "stated_params",
                                       "operations", "draw") if n in names}
        order = int(names.get("ORDER", DEFAULT_ORDER))
        sheet = names.get("SHEET")
        if not (isinstance(names.get("HOME"), (HomeStage, type(None)))
                and isinstance(sheet, (SheetSection, type(None)))):
            raise TypeError(f"kind {names['ID']}: HOME must be a HomeStage and SHEET a SheetSection")
        if sheet is not None:  # a kind's section is keyed by its id and sits at its ORDER unless it says otherwise
            sheet = replace(sheet, key=sheet.key or names["ID"],
                            position=order if sheet.position is None else sheet.position)
        return cls(ID=names["ID"], VERSION=int(names["VERSION"]), LEVELS=tuple(names["LEVELS"]),
                   GUARDS=tuple(names["GUARDS"]), generate=names.get("generate"), ORDER=order,
                   MISTAKES=tuple(names.get("MISTAKES", ())), STATED=tuple(names.get("STATED", ())),
                   CONVENTIONS=dict(names.get("CONVENTIONS", {})), DEFAULTED=tuple(names.get("DEFAULTED", ())),
                   home=names.get("HOME"), sheet=sheet, folder=Path(module.__file__).parent,
                   given_shown=dict(names.get("GIVEN_SHOWN", {})), EXP_GRID=dict(names.get("EXP_GRID", {})),
                   RENAMED=dict(names.get("RENAMED", {})), **hooks)


def _kind_modules(paths: Sequence[str]) -> Iterator[ModuleType]:
    for info in pkgutil.iter_modules(paths):
        if info.ispkg and not info.name.startswith("_"):
            yield importlib.import_module(f"{KINDS_PACKAGE}.{info.name}")


def discover(extra_paths: Iterable[str | Path] = ()) -> dict[str, Kind]:
    """Every kind folder in exercises/kinds/ and in each of `extra_paths` (folders holding kind folders),
    resolved to its contract, in menu order. A kind from an extra path is imported as
    exercises.kinds.<id>, so its relative imports (from ...core.draft import Draft) work as in the package."""
    extra = [str(Path(p).resolve()) for p in extra_paths]
    kinds_pkg = importlib.import_module(KINDS_PACKAGE)  # here, not at the top: the kinds build on the engine
    search = list(kinds_pkg.__path__)
    kinds_pkg.__path__.extend(p for p in extra if p not in search)  # only while importing
    try:
        found = [Kind.from_module(m) for m in _kind_modules(search + extra)]
    finally:
        kinds_pkg.__path__[:] = search
    ids = [k.ID for k in found]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"kind ids defined twice: {', '.join(repeated)}")
    own = [m for k in found for m in k.MISTAKES]
    twice = sorted({m for m in own if own.count(m) > 1})
    if twice:
        raise ValueError(f"mistake ids declared by two kinds: {', '.join(twice)}")
    found.sort(key=lambda k: (k.ORDER, k.ID))
    model.RENAMED_GIVEN.update({k.ID: dict(k.RENAMED) for k in found if k.RENAMED})
    return {k.ID: k for k in found}


KINDS: dict[str, Kind] = discover()


@contextmanager
def added_kinds(*paths: str | Path) -> Iterator[dict[str, Kind]]:
    """Kind folders from `paths` in the registry (and their texts in the catalogs) for the duration
    of a with block, then gone again: for tests and for trying a kind out. Yields the new kinds."""
    before = dict(KINDS)
    new = {k: v for k, v in discover(paths).items() if k not in before}
    for kind in new.values():
        i18n.add_kind_folder(kind.folder)
    KINDS.update(new)
    _reorder()
    try:
        yield new
    finally:
        KINDS.clear()
        KINDS.update(before)
        for kind in new.values():
            i18n.remove_kind_folder(kind.folder)
            for name in [m for m in sys.modules if m == f"{KINDS_PACKAGE}.{kind.ID}"
                         or m.startswith(f"{KINDS_PACKAGE}.{kind.ID}.")]:
                del sys.modules[name]


def _reorder() -> None:
    ordered = sorted(KINDS.values(), key=lambda k: (k.ORDER, k.ID))
    KINDS.clear()
    KINDS.update((k.ID, k) for k in ordered)


def rng_for(kind_id: str, seed: int, level: int) -> np.random.Generator:
    """The generator for one variant: a stable hash of the kind id, the level and the seed."""
    return np.random.default_rng(np.random.SeedSequence([zlib.crc32(kind_id.encode()), level, seed]))


def validate(kind_id: str, seed: Any, level: Any) -> tuple[str, int, int]:
    """Check a (kind, seed, level) triple; raise ValueError with a plain message if it is not valid."""
    if kind_id not in KINDS:
        raise ValueError(f"unknown kind {kind_id!r}; known kinds: {', '.join(KINDS)}")
    try:
        seed, level = int(seed), int(level)
    except (TypeError, ValueError):
        raise ValueError("seed and level must be whole numbers") from None
    if not 0 <= seed < MAX_SEED:
        raise ValueError(f"seed must be between 0 and {MAX_SEED - 1}")
    if level not in KINDS[kind_id].LEVELS:
        raise ValueError(f"level must be one of {', '.join(map(str, KINDS[kind_id].LEVELS))} for {kind_id}")
    return kind_id, seed, level


def generate(kind_id: str, seed: int = 0, level: int = 1) -> Exercise:
    """The exercise (kind, seed, level): the sampler's first candidate whose guarded mistakes stay apart,
    drawn from the generator of that triple, so the result is deterministic and a mistake added to the
    catalog changes no other kind."""
    kind_id, seed, level = validate(kind_id, seed, level)
    kind = KINDS[kind_id]

    def make(given: dict, parts: list[Part], params: dict) -> Exercise:
        return Exercise(kind=kind_id, seed=seed, level=level, version=kind.VERSION, given=given,
                        parts=tuple(parts), params=params)

    return sampler.sample(kind, rng_for(kind_id, seed, level), level, make)


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The catalog keys of the exercise's statement, as its kind chooses them (by level, by part)."""
    kind = KINDS.get(ex.kind)
    return tuple(kind.prompt_keys(ex) if kind is not None else default_prompt_keys(ex))


def prompt(ex: Exercise, lang: str = i18n.DEFAULT_LANG) -> str:
    """The exercise's statement in `lang`: the same text on Practice, in worksheets and on the CLI."""
    return " ".join(i18n.t(key, lang, **ex.params) for key in prompt_keys(ex))


def operations(ex: Exercise) -> budget.Operations:
    """The hand work of `ex`: its kind's own count where the kind declares one, else the step records'."""
    kind = KINDS.get(ex.kind)
    return budget.operations(ex, kind.operations if kind is not None else None)


def minutes(ex: Exercise) -> float:
    """The minutes a hand solution of `ex` takes (budget.RATES)."""
    return operations(ex).minutes


def about_minutes(ex: Exercise) -> int:
    """The time to show ("about N minutes"): minutes rounded up to a whole minute, at least 1."""
    return max(1, math.ceil(minutes(ex) - 1e-9))


def within_budget(ex: Exercise) -> bool:
    """The exercise fits its level's minutes (budget.BUDGET_MINUTES)."""
    return minutes(ex) <= budget.BUDGET_MINUTES[ex.level] + 1e-9


def mistake_ids() -> tuple[str, ...]:
    """Every catalogued mistake, one list: the step records' (misconceptions.CATALOG), then each kind's own
    (its MISTAKES), in menu order."""
    return (*misconceptions.CATALOG, *(m for kind in KINDS.values() for m in kind.MISTAKES))
