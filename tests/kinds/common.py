"""Checks every small kind's test file makes: its references against an independent NumPy computation, its
guarded mistakes named (exact and rounded to 2 places), the sizes and values of each level, its minutes."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

import exercises
from exercises.cli import selftest
from exercises.core import budget, engine, grading, misconceptions, pipeline
from exercises.core.numbers import round_half_up
from tests import generated

SEEDS = range(30)


def references_agree(kind: str, oracle: Callable[[Mapping], Mapping[str, np.ndarray]]) -> None:
    """oracle(ex.given) -> {name: value}, computed independently of the step records; every part the
    exercise asks for among them is compared."""
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            ex = generated.exercise(kind, seed, level)
            expected = oracle(ex.given)
            assert set(ex.part_names) & set(expected), (kind, level, seed, ex.part_names)
            for name, value in expected.items():
                if name not in ex.part_names:
                    continue
                np.testing.assert_allclose(ex.part(name).reference, value, atol=1e-12,
                                           err_msg=f"{kind} level {level} seed {seed} part {name}")


def guarded_mistakes_named(kind: str) -> set[str]:
    """The guarded mistakes that apply to some exercise of `kind` (seeds 0-29, every level). Each of them is
    named as itself, exact and rounded to 2 places, at each of those exercises: test_misconceptions grades
    every catalogued mistake that applies, of every kind, level and seed 0-29."""
    guards = exercises.KINDS[kind].GUARDS
    return {mid for level in exercises.KINDS[kind].LEVELS for seed in SEEDS
            for mid in misconceptions.alternatives(generated.exercise(kind, seed, level), guards)}


def levels_hold(kind: str, check: Callable[[exercises.Exercise], None]) -> None:
    """check(ex) for every level and seed, and every exercise within its level's minutes."""
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            ex = generated.exercise(kind, seed, level)
            check(ex)
            assert engine.minutes(ex) <= budget.BUDGET_MINUTES[level], (kind, level, seed, engine.minutes(ex))


def levels_hold_without_runaway(kind: str, check: Callable[[exercises.Exercise], None],
                                distinct_at_least: int | None = None) -> None:
    """levels_hold(kind, check); every level far from a runaway redraw (assert_within_minutes_and_no_runaway);
    with distinct_at_least, at least that many of seeds 0-39 give distinct givens at every level."""
    levels_hold(kind, check)
    for level in exercises.KINDS[kind].LEVELS:
        assert_within_minutes_and_no_runaway(kind, level)
        if distinct_at_least is not None:
            seen = distinct_givens(kind, level, range(40))
            assert seen >= distinct_at_least, f"{kind} level {level}: too few distinct ({seen} of 40)"


def careful_by_pipeline(ex: exercises.Exercise, places: int | None) -> dict[str, np.ndarray]:
    """What a student writes who rounds each value to `places` as they compute it (None: keeps every digit):
    the kind's pipeline run on its givens."""
    env = pipeline.run(ex.given, rounding=places)
    return {name: env[name] for name in ex.part_names}


def solution_steps(ex: exercises.Exercise, after: tuple[str, ...] = ()) -> dict:
    """The worked solution's steps by name, asserted to be one a part in the parts' order, then `after`."""
    steps = exercises.solve(ex)
    names = [s.name for s in steps]
    assert names == [*ex.part_names, *after], f"{ex.kind} level {ex.level} seed {ex.seed}: steps {names}"
    return {s.name: s for s in steps}


H = 1e-5  # the step of central differences


def central_difference(f, x: np.ndarray) -> np.ndarray:
    """∂f/∂x by central differences: one column per entry of x, f's output flattened; (f size, x size)."""
    x = np.asarray(x, dtype=float)
    cols = []
    for idx in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += H
        down[idx] -= H
        cols.append((np.ravel(f(up)) - np.ravel(f(down))) / (2 * H))
    return np.stack(cols, axis=1)


def graded_right(ex, answer) -> bool:
    fb = exercises.grade(ex, answer)
    return fb.correct and fb.score == 1.0 and all((p.status == grading.RIGHT).all() for p in fb.parts.values())


def misconception(ex, answer) -> str | None:
    return exercises.grade(ex, answer).misconception


def assert_careful_students_are_right(kind: str, level: int, student, seeds=range(50)) -> None:
    """A careful student of `kind` who rounds to 2 places, to 3, or not at all is right on every seed."""
    for seed in seeds:
        ex = generated.exercise(kind, seed, level)
        for places in (2, 3, None):
            assert graded_right(ex, student(ex, places)), (ex.id, places)


def named_mistakes(kind: str, level: int, mistakes_of, seeds=range(50)) -> set[str]:
    """Every mistake `mistakes_of(ex, part)` gives, exact and rounded to 2 places, is named as itself; the ids seen."""
    named = set()
    for seed in seeds:
        ex = generated.exercise(kind, seed, level)
        right = {p.name: p.reference for p in ex.parts}
        for part in ex.parts:
            for mid, alt in mistakes_of(ex, part.name).items():
                for value in (alt, round_half_up(alt, 2)):
                    assert misconception(ex, {**right, part.name: value}) == mid, (ex.id, part.name, mid)
                named.add(mid)
    return named


def assert_named_exactly(kind: str, level: int, mistakes_of, expected: set[str], seeds=range(10)) -> None:
    """named_mistakes(kind, level, mistakes_of, seeds) names exactly `expected`."""
    named = named_mistakes(kind, level, mistakes_of, seeds)
    assert named == expected, f"{kind} level {level}: named {sorted(named)}, expected {sorted(expected)}"


def find(kind: str, level: int, wanted, seeds=range(400)) -> exercises.Exercise:
    """The first exercise of (kind, level) that satisfies `wanted`."""
    for seed in seeds:
        ex = exercises.generate(kind, seed, level)
        if wanted(ex):
            return ex
    raise AssertionError(f"no {kind} level {level} exercise fits")


def careful_and_selftest_answers_grade_as_such(kind: str, level: int, careful, seeds) -> None:
    """Rounding each value to 2 or 3 places as it is written (careful(ex, places)), or keeping every digit,
    is right; the self-test's right, wrong and unreadable answers grade as such."""
    for seed in seeds:
        ex = generated.exercise(kind, seed, level)
        case = f"{kind} level {level} seed {seed}"
        for places in (2, 3, None):
            fb = exercises.grade(ex, careful(ex, places))
            assert fb.correct and fb.score == 1.0 and fb.misconception is None, f"{case} rounding {places}"
        rng = np.random.default_rng(seed)
        assert exercises.grade(ex, selftest.correct_answer(ex)).correct, case
        wrong = exercises.grade(ex, selftest.incorrect_answer(ex, rng))
        assert wrong.graded and not wrong.correct, case
        assert exercises.grade(ex, selftest.invalid_answer(ex, rng)).score is None, case


def distinct_givens(kind: str, level: int, seeds=range(200)) -> int:
    """How many of `seeds` give distinct given values (variety)."""
    return len({repr(sorted((k, np.asarray(v).tolist()) for k, v in exercises.generate(kind, s, level).given.items()))
                for s in seeds})


def assert_guarded_mistakes_apart(kind: str, level: int, careful, seeds=range(60)) -> None:
    """No guarded mistake collides (misconceptions.collides), and each lies apart from what a careful
    student who rounds to 2 places writes (careful(ex, 2))."""
    guards = exercises.KINDS[kind].GUARDS
    for seed in seeds:
        ex = generated.exercise(kind, seed, level)
        case = f"{kind} level {level} seed {seed}"
        assert not misconceptions.collides(ex, guards), case
        written = careful(ex, 2)
        for name, alternatives in misconceptions.by_part(ex, guards).items():
            gap = misconceptions.separation(ex.part(name))
            for mid, value in alternatives.items():
                assert misconceptions.apart(written[name], value, gap), f"{case}: {mid} at {name}"


def assert_within_minutes_and_no_runaway(kind: str, level: int) -> None:
    """Every exercise of seeds 0-29 fits its level's minutes; generate + grade stays far from a runaway redraw
    (< 0.1 s of CPU per exercise over seeds 100-119)."""
    import time

    for seed in range(30):
        assert engine.within_budget(generated.exercise(kind, seed, level)), (kind, level, seed)
    start = time.process_time()
    for seed in range(100, 120):
        ex = exercises.generate(kind, seed, level)
        exercises.grade(ex, {p.name: p.reference for p in ex.parts})
    per = (time.process_time() - start) / 20
    assert per < 0.1, (kind, level, "seeds 100-119", f"{per * 1000:.1f} ms per exercise")


def assert_moodle_round_trip(kind: str, seed: int = 0) -> None:
    """One exercise per level as a Moodle Cloze question: the rounded values its boxes accept, read back from
    the XML, grade fully right."""
    import xml.etree.ElementTree as ET

    from exercises.worksheets import moodle
    from tests.test_exports import _cloze_answers

    exs = [generated.exercise(kind, seed, level) for level in exercises.KINDS[kind].LEVELS]
    root = ET.fromstring(moodle.to_xml(kind, None, [(None, exs)]))
    questions = [q for q in root if q.get("type") == "cloze"]
    assert len(questions) == len(exs), (kind, len(questions))
    for q, ex in zip(questions, exs):
        fb = grading.grade(ex, _cloze_answers(ex, q.find("questiontext/text").text))
        assert fb.graded and fb.score == 1.0, (ex.id, fb.message)
