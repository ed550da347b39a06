"""Every exercise is pinned: none changes unless its kind's VERSION says so (DESIGN §3.2)."""

from __future__ import annotations

import numpy as np

import exercises
from exercises.cli import pins
from exercises.core.draft import Draft


def test_every_pinned_exercise_is_unchanged(current_pins):
    changed = pins.silent_changes(pins.load(), current_pins)
    assert not changed, ("exercises changed without a VERSION bump (bump the kind's VERSION, then "
                         "`python -m exercises.cli.pins --write`): " + "; ".join(changed[:20]))


def test_pins_describe_every_kind_at_its_version(current_pins):
    assert not pins.stale(pins.load(), current_pins), "rewrite the pins: python -m exercises.cli.pins --write"
    for kind_id, kind in exercises.KINDS.items():
        assert set(current_pins[kind_id]["levels"]) == {str(level) for level in kind.LEVELS}
        assert all(len(prints) == len(pins.SEEDS) for prints in current_pins[kind_id]["levels"].values())


def test_a_changed_generator_without_a_bump_fails_the_pins(monkeypatch):
    kind = exercises.KINDS["softmax"]
    original = kind.generate

    def shifted(rng, level):  # the same draw with one given value changed by a half
        draft = original(rng, level)
        given = dict(draft.given)
        name = "masked" if "masked" in given else "scaled"
        z = np.array(given[name], dtype=float)
        z[0, 0] += 0.5
        given[name] = z
        return Draft(given=given, parts=draft.parts, params=draft.params)

    monkeypatch.setattr(kind, "generate", shifted)
    changed = pins.silent_changes(pins.load(), pins.compute({"softmax": kind}))
    assert len(changed) == 3 * len(pins.SEEDS)
    assert "softmax level 1 seed 0" in changed


def test_a_version_bump_is_not_a_silent_change_but_leaves_the_pins_stale(monkeypatch):
    kind = exercises.KINDS["scores"]
    monkeypatch.setattr(kind, "VERSION", kind.VERSION + 1)
    current = pins.compute({"scores": kind})
    assert pins.silent_changes(pins.load(), current) == []
    assert pins.stale({"scores": pins.load()["scores"]}, current) == [
        f"scores: VERSION {kind.VERSION}, pins written for {kind.VERSION - 1}"]


def test_a_fingerprint_sees_every_field_a_learner_is_graded_on():
    ex = exercises.generate("softmax", seed=3, level=2)
    base = pins.fingerprint(ex)
    d = ex.to_dict()
    for change in ("given", "decimals", "reference", "name"):
        e = exercises.Exercise.from_dict(d)
        e2 = e.to_dict()
        if change == "given":
            key = next(k for k, v in e2["given"].items() if isinstance(v, list))
            e2["given"][key][0][0] = 7
        elif change == "decimals":
            e2["parts"][0]["decimals"] = 3
        elif change == "reference":
            e2["parts"][0]["reference"][0][0] = 0.123
        else:
            e2["parts"][0]["name"] = "O"
        assert pins.fingerprint(exercises.Exercise.from_dict(e2)) != base, change
    assert pins.fingerprint(exercises.Exercise.from_dict(d)) == base
