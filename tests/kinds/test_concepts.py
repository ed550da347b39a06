"""concepts: multiple-choice questions on the ideas of the reference notes, each wrong option explained."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core import softmax
from exercises.cli import selftest
from exercises.i18n import catalog, t
from exercises.kinds import concepts
from tests.kinds.common import find


def _choice_parts(level_seeds):
    for level, seed in level_seeds:
        ex = exercises.generate("concepts", seed, level)
        for part in ex.parts:
            if part.is_choice:
                yield ex, part


ALL = [(level, seed) for level in (1, 2, 3) for seed in range(30)]


def test_concepts_every_wrong_option_has_its_own_explanation_that_hides_the_answer():
    seen = set()
    for ex, part in _choice_parts(ALL):
        right = int(part.reference[0, 0])
        right_text = t(part.options[right], **part.params)
        for index, option in enumerate(part.options):
            fb = exercises.grade(ex, {**selftest.correct_answer(ex), part.name: chr(ord("A") + index)})
            pfb = fb.parts[part.name]
            if index == right:
                assert fb.correct and pfb.explanation is None and pfb.misconception is None
                continue
            assert not fb.correct and pfb.misconception == option
            assert pfb.explanation is not None and pfb.explanation.key == f"misconception.{option}"
            why = pfb.explanation.render()
            assert why != pfb.explanation.key and "{" not in why
            assert right_text not in why and right_text not in fb.message.render()
            assert why in fb.message.render()  # the feedback message carries the explanation
            assert t(f"misconception.{option}") == why  # the same text without parameters
            seen.add(option)
    explanations = {seen_key: t(f"misconception.{seen_key}") for seen_key in seen}
    assert len(set(explanations.values())) == len(explanations)  # one explanation per wrong option
    wrong_options = {concepts.option_key(q.id, w) for q in concepts.QUESTIONS.values()
                     if isinstance(q, concepts.MultipleChoice) for w in q.wrong}
    assert seen == wrong_options


def test_concepts_option_order_and_numbers_vary():
    orders, cells = set(), set()
    for _ex, part in _choice_parts(ALL):
        if part.name == "score_cell":
            orders.add(part.options)
            cells.add((part.params["i"], part.params["j"]))
            assert part.params["i"] != part.params["j"]
            assert 1 <= part.params["i"] <= part.params["n"] and 1 <= part.params["j"] <= part.params["n"]
    assert len(orders) >= 6 and len(cells) >= 6


def test_concepts_questions_come_from_the_reference_topics():
    asked = {p.name for level, seed in ALL for p in exercises.generate("concepts", seed, level).parts}
    assert {"score_cell", "k_transposed", "mask_inf", "max_shift", "rows_sum", "heads"} <= asked


def test_concepts_short_answers():
    ex = find("concepts", 1, lambda e: True)
    part = ex.part("masked_count")
    n = part.params["n"]
    assert part.reference[0, 0] == n * (n - 1) / 2 and part.decimals == 0
    fb = exercises.grade(ex, {**selftest.correct_answer(ex), "masked_count": str(n * (n + 1) // 2)})
    assert fb.parts["masked_count"].misconception == "mask_diagonal"

    ex = find("concepts", 3, lambda e: "std_dk" in e.part_names)
    d_k = ex.part("std_dk").params["d_k"]
    assert ex.part("std_dk").reference[0, 0] == np.sqrt(d_k)
    fb = exercises.grade(ex, {**selftest.correct_answer(ex), "std_dk": str(d_k)})
    assert fb.parts["std_dk"].misconception == "variance_std_confused"

    ex = find("concepts", 2, lambda e: "softmax_big" in e.part_names)
    p = ex.part("softmax_big").params
    expected = softmax(np.array([[p["a"], p["b"]]], dtype=float))[0, 1]
    assert abs(ex.part("softmax_big").reference[0, 0] - expected) < 1e-12


def test_concepts_json_round_trip_keeps_options_and_params():
    ex = exercises.generate("concepts", 11, 2)
    back = exercises.Exercise.from_dict(ex.to_dict())
    for a, b in zip(ex.parts, back.parts):
        assert a.options == b.options and a.params == b.params and a.prompt == b.prompt


def test_concepts_solution_shows_the_letter_and_the_reason():
    ex = find("concepts", 2, lambda e: True)
    for step, part in zip(exercises.solve(ex), ex.parts):
        if part.is_choice:
            right = int(part.reference[0, 0])
            assert step.display() == rf"\text{{{chr(ord('A') + right)}}}"
            assert step.note.key == part.options[right]


LANGS = ("en", "zh")


MARGIN = 0.15  # over chance (1 / number of options)


MAX_RATIO = 1.3  # the right option at most this many times the longest wrong one


CHOICES = [q for q in concepts.QUESTIONS.values() if isinstance(q, concepts.MultipleChoice)]


def _lengths(q: concepts.MultipleChoice, lang: str, params: dict) -> tuple[int, list[int]]:
    right = len(t(concepts.option_key(q.id, q.right), lang, **params))
    return right, [len(t(concepts.option_key(q.id, w), lang, **params)) for w in q.wrong]


def _params(q: concepts.MultipleChoice, seed: int) -> dict:
    return q.draw(np.random.default_rng(seed))


# facts each explanation (or right option) must state, in both languages: reviewed against DESIGN §1
FACTS = {
    "misconception.concepts.mask_inf.zero_is_zero": ["e^0 = 1", "−∞"],
    "misconception.concepts.mask_inf.negative_pull": ["0"],
    "misconception.concepts.causal_row.before_only": ["j > i", "np.triu", "k=1"],
    "misconception.concepts.causal_row.from_i": ["j > i"],
    "misconception.concepts.causal_row.all": ["e^(−∞) = 0"],
    "misconception.concepts.scale_why.by_dk": ["1/√d_k"],
    "misconception.concepts.scale_why.speed": ["d_k = 64", "8"],
    "misconception.concepts.output_row.weighted_columns": ["Aᵀ V"],
    "misconception.concepts.output_row.own_value": ["Σ_j a_ij V[j]"],
    "misconception.concepts.embed_grad.last_row": ["G_E[ids] = G_X"],
    "misconception.concepts.heads.averaged": ["h·d_v"],
    "concepts.scale_why.unit_variance": ["Var(q·k) = d_k", "√d_k"],
    "concepts.max_shift.factor_cancels": ["e^(z−c) = e^z · e^(−c)"],
}


@pytest.mark.parametrize("lang", LANGS)
def test_no_right_option_is_much_longer_than_the_longest_wrong_one(lang):
    for q in CHOICES:
        for seed in range(20):
            right, wrong = _lengths(q, lang, _params(q, seed))
            assert right <= MAX_RATIO * max(wrong), (lang, q.id, right, wrong)


@pytest.mark.parametrize("lang", LANGS)
def test_the_right_option_is_the_longest_no_more_often_than_chance(lang):
    """Over all questions (the right option was the longest in 6 of 6, 1.5–2.8× the longest wrong one)."""
    longest = sum(right >= max(wrong) for q in CHOICES for right, wrong in [_lengths(q, lang, _params(q, 0))])
    chance = np.mean([1 / (1 + len(q.wrong)) for q in CHOICES])
    assert longest / len(CHOICES) <= chance + MARGIN, (lang, longest, len(CHOICES))


@pytest.mark.parametrize("lang", LANGS)
def test_picking_the_longest_option_scores_no_better_than_chance_on_generated_exercises(lang):
    picked = right = 0
    for level in (1, 2, 3):
        for seed in range(30):
            for part in exercises.generate("concepts", seed, level).parts:
                if part.is_choice:
                    lengths = [len(t(key, lang, **part.params)) for key in part.options]
                    picked += 1
                    right += int(np.argmax(lengths)) == int(part.reference[0, 0])
    assert right / picked <= 1 / 4 + MARGIN, (lang, right, picked)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_each_level_draws_from_at_least_six_questions(level):
    pool, _ = concepts.POOLS[level]
    assert len(set(pool)) >= 6
    asked = {p.name for seed in range(60) for p in exercises.generate("concepts", seed, level).parts if p.is_choice}
    assert asked == set(pool)


@pytest.mark.parametrize("lang", LANGS)
def test_every_option_and_explanation_is_written_and_distinct(lang):
    texts = catalog(lang)
    for q in CHOICES:
        params = _params(q, 0)
        options = [t(concepts.option_key(q.id, o), lang, **params) for o in (q.right, *q.wrong)]
        assert len(set(options)) == len(options) and all("{" not in o for o in options), q.id
        assert concepts.option_key(q.id, q.right) in texts and f"concepts.{q.id}.question" in texts
        for w in q.wrong:
            why = texts[f"misconception.concepts.{q.id}.{w}"]
            assert why and options[0] not in why, (q.id, w)


@pytest.mark.parametrize("lang", LANGS)
def test_explanations_state_the_facts_of_the_notes(lang):
    texts = catalog(lang)
    for key, facts in FACTS.items():
        for fact in facts:
            assert fact in texts[key], (lang, key, fact)


def test_softmax_big_has_the_exp_aid_its_question_asks_for():
    """softmax([a, b]) minus the larger score needs e^0 and e^(a − b); it had no aid."""
    found = 0
    for level in (2, 3):
        for seed in range(30):
            ex = exercises.generate("concepts", seed, level)
            if "softmax_big" not in ex.part_names:
                continue
            found += 1
            p = ex.part("softmax_big").params
            aids = exercises.aids(ex)
            assert {0.0, float(p["a"] - p["b"])} <= {e.x for e in aids.exp_table}  # on the level's grid
            assert aids.table_latex() is not None
            weight = 1 / (1 + np.exp(p["a"] - p["b"]))  # from the aid's two numbers
            assert abs(weight - ex.part("softmax_big").reference[0, 0]) < 1e-12
            step = {s.name: s for s in exercises.solve(ex)}["softmax_big"]
            assert f"e^{{{p['a'] - p['b']}}}" in step.display()
    assert found >= 10
    no_short = exercises.generate("concepts", 0, 1)
    assert "softmax_big" not in no_short.part_names and exercises.aids(no_short).exp_table == ()


def test_every_variant_grades_its_reference_right():
    for level in (1, 2, 3):
        for seed in range(30):
            ex = exercises.generate("concepts", seed, level)
            assert exercises.grade(ex, selftest.correct_answer(ex)).correct


@pytest.mark.parametrize("lang", LANGS)
def test_rotating_v_is_asked_and_explained_at_level_3(lang):
    """The rope kind's parts (Q_rot, K_rot, scores) cannot show a rotated V, so level 3 asks
    which vectors RoPE rotates; picking "queries, keys and values" is named and explained."""
    ex = next(e for e in (exercises.generate("concepts", s, 3) for s in range(200)) if "rope_rotates" in e.part_names)
    part = ex.part("rope_rotates")
    wrong = part.options.index(concepts.option_key("rope_rotates", "q_k_and_v"))
    answer = {**selftest.correct_answer(ex), "rope_rotates": wrong}
    got = exercises.grade(ex, answer).parts["rope_rotates"]
    assert not got.correct and got.misconception == "concepts.rope_rotates.q_k_and_v"
    said = t(got.explanation.key, lang, **got.explanation.params)
    assert said == t("misconception.concepts.rope_rotates.q_k_and_v", lang) and "V" in said
    assert all("rope_rotates" not in exercises.generate("concepts", s, lv).part_names for lv in (1, 2) for s in range(60))


def test_attention_mixing_and_he_init_are_computed_and_their_mistakes_named():
    """Attention's weight in sentence B is the softmax of B's own scores (a fixed mixing would keep A's);
    the weights' standard deviation is 1/√n (1/n, their variance, is named)."""
    ex = find("concepts", 3, lambda e: "attention_mixing" in e.part_names)
    p = ex.part("attention_mixing").params
    a, b, c = p["a"], p["b"], p["c"]
    w = np.exp([a * a, a * c])  # softmax([x₁x₁, x₁x₂]) of sentence B, written out
    assert ex.part("attention_mixing").reference[0, 0] == pytest.approx(w[1] / w.sum()), ex.id
    assert float(p["w_a"]) == pytest.approx(1 / (1 + np.exp(a * a - a * b)), abs=0.005), ex.id
    fb = exercises.grade(ex, {**selftest.correct_answer(ex), "attention_mixing": p["w_a"]})
    assert fb.parts["attention_mixing"].misconception == "concepts_fixed_mixing", ex.id
    exponents = {e.x for e in exercises.aids(ex).exp_table}
    assert {0.0, -abs(a * a - a * c)} <= exponents, (ex.id, exponents)

    ex = find("concepts", 2, lambda e: "he_init" in e.part_names)
    n = ex.part("he_init").params["n"]
    assert ex.part("he_init").reference[0, 0] == pytest.approx(1 / np.sqrt(n)), ex.id
    fb = exercises.grade(ex, {**selftest.correct_answer(ex), "he_init": str(1 / n)})
    assert fb.parts["he_init"].misconception == "concepts_weight_variance", ex.id
