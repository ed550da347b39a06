"""The eˣ aid is a fixed grid per kind and level, never exactly the exponents a problem needs (in an exam
it is the one aid kept): every exponent a problem needs is on the grid, or its eˣ rounds to 0 at the
table's places, and lies within the grid's range; the caption says which grid it is."""

from __future__ import annotations

import importlib
import math

import pytest

import exercises
from exercises.rendering import latex as L
from tests import generated

aids_module = importlib.import_module("exercises.solutions.aids")  # the module (the package exports a function aids)

SEEDS = range(20)
CASES = [(kind, level) for kind, module in exercises.KINDS.items() for level in module.LEVELS]


def needed_exponents(ex, monkeypatch) -> list[float]:
    """The exponents the problem's softmaxes meet (the aid as it was: no grid declared)."""
    with monkeypatch.context() as m:
        m.setattr(aids_module, "exp_grid", lambda kind, level: None)
        return [e.x for e in aids_module.aids.__wrapped__(ex).exp_table]


@pytest.mark.parametrize("kind, level", CASES)
def test_the_ex_aid_is_the_levels_fixed_grid(kind, level, monkeypatch):
    grids, differs, needing = set(), 0, 0
    for seed in SEEDS:
        ex = generated.exercise(kind, seed, level)
        needed = needed_exponents(ex, monkeypatch)
        aid = exercises.aids(ex)
        case = f"{kind} level {level} seed {seed}"
        if not needed:
            assert not aid.exp_table, f"{case}: an eˣ table where no exponential is needed"
            continue
        needing += 1
        grid = tuple(round(e.x, 9) for e in aid.exp_table)
        grids.add(grid)
        assert aid.exp_caption is not None and aid.exp_caption.key == "aids.exp_grid", f"{case}: no caption"
        for lang in ("en", "zh"):
            caption = aid.exp_caption.render(lang)
            assert "{" not in caption and "x" in caption, f"{case} ({lang}): {caption}"
        lo, hi = min(grid), max(grid)
        small = 0.5 * 10 ** -L.EXP_PLACES  # eˣ below this reads 0.000 in the table
        for x in needed:
            assert lo - 1e-9 <= x <= hi + 1e-9, f"{case}: exponent {x} outside the grid [{lo}, {hi}]"
            on_grid = any(abs(x - g) < 1e-9 for g in grid)
            assert on_grid or math.exp(x) < small, f"{case}: exponent {x} is not on the grid {grid}"
        differs += set(grid) != {round(x, 9) for x in needed}
    if needing:
        assert len(grids) == 1, f"{kind} level {level}: the grid changes with the seed: {sorted(grids)[:2]}"
        assert differs >= needing / 2, f"{kind} level {level}: the grid is the problem's own set for most seeds"


def test_attention_level_1_seed_77738_lists_more_than_its_scaled_scores(monkeypatch):
    """The reported case: the problem needs ½, 1, 3/2, 2 … the aid lists the level's ½-grid from 0 to 2."""
    ex = exercises.generate("attention", 77738, 1)
    needed = sorted(needed_exponents(ex, monkeypatch))
    listed = [e.x for e in exercises.aids(ex).exp_table]
    assert listed == [0.0, 0.5, 1.0, 1.5, 2.0], f"attention level 1 seed 77738: {listed}"
    assert listed != needed, f"attention level 1 seed 77738: the aid is the problem's set {needed}"
    assert "x from 0 to 2 in steps of 1/2" in exercises.aids(ex).exp_caption.render("en")


def test_the_practice_page_shows_the_grid_and_says_so():
    """attention level 1 seed 77738 needs e^0, e^½, e^(3/2): the page's table also lists e^1 and e^2, and
    its caption names the grid, in English and Chinese."""
    from tests.apptest_helpers import open_page

    for lang, words in (("en", "x from 0 to 2 in steps of 1/2"), ("zh", "x 从 0 到 2，步长 1/2")):
        at = open_page("app_pages/practice.py", {"kind": "attention", "level": "1", "seed": "77738"}, lang=lang)
        assert not at.exception
        captions = [str(c.value) for c in at.caption]
        assert any(words in c for c in captions), f"attention level 1 seed 77738 ({lang}): {captions}"
        tables = [str(x.value) for x in at.latex if r"\hline" in str(x.value)]
        assert tables and r"1 & 2.718" in tables[0] and r"2 & 7.389" in tables[0], tables
