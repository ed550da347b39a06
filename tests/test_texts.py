"""Every kind's title, prompts and part labels are in the catalog, in every language."""

from __future__ import annotations

import pytest

import exercises
from exercises.i18n import catalog, t
from tests import generated

MY_KINDS = ("attention", "shapes", "variance", "concepts")


@pytest.mark.parametrize("kind_id", MY_KINDS)
def test_titles_prompts_and_part_labels_are_in_the_catalog(kind_id):
    en = catalog("en")
    for key in ("title", "summary", "prompt"):
        assert f"kind.{kind_id}.{key}" in en
    for level in exercises.KINDS[kind_id].LEVELS:
        for seed in range(10):
            ex = generated.exercise(kind_id, seed, level)
            rendered = t(f"kind.{kind_id}.prompt", **ex.params)
            assert "{" not in rendered, rendered  # every placeholder filled
            for part in ex.parts:
                assert f"part.{part.name}" in en, part.name
                if part.prompt:
                    assert "{" not in t(part.prompt, **part.params)
                for option in part.options or ():
                    assert option in en and "{" not in t(option, **part.params)
