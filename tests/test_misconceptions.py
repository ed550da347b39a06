"""The misconception catalog (DESIGN §5): every mistake is named, exact and rounded to 2
decimals, over 30 seeds of every level of every kind where it applies; the right answer never is;
generated variants keep every mistake apart from the reference and from each other."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from functools import cache

import numpy as np
import pytest

import exercises
from exercises.core import grading, misconceptions, pipeline, sampler
from exercises.core.model import Exercise, Part
from exercises.i18n import catalog, languages
from tests import generated
from tests.answers import near_answers

SEEDS = range(30)
CASES = [(kind, level) for kind, module in exercises.KINDS.items() for level in module.LEVELS]

# G_X summed over some of the paths X feeds: {id: the paths kept}
GRAD_X_PATH_MISTAKES = {"grad_x_no_value_path": "QK", "grad_x_no_key_path": "QV", "grad_x_no_query_path": "KV",
                        "grad_x_query_path_only": "Q", "grad_x_key_path_only": "K", "grad_x_value_path_only": "V"}

# where each id must apply (at some seed and level): the kinds whose step makes that mistake
EXPECTED_KINDS = {
    "transposed_scores": {"scores", "attention"},
    "no_scaling": {"scaling", "attention"},
    "scaled_by_dk": {"scaling", "attention"},
    "mask_diagonal": {"masking", "attention"},
    "mask_wrong_triangle": {"masking", "attention"},
    "no_mask": {"masking", "attention"},
    "mask_after_softmax": {"masking", "attention"},
    "softmax_columns": {"softmax", "masking", "attention"},
    "no_exp": {"softmax", "masking", "attention"},
    "weights_transposed": {"weighted_sum", "attention"},
    "grad_a_transposed": {"grad_weighted_sum", "backprop"},
    "grad_v_no_transpose": {"grad_weighted_sum", "backprop"},
    "softmax_grad_missing_term": {"grad_softmax", "backprop"},
    "grad_scores_no_scale": {"grad_scores", "backprop"},
    "grad_k_no_transpose": {"grad_scores", "backprop"},
    "embedding_grad_no_accumulate": {"grad_embedding"},
    "scores_not_transposed": {"scores"},
    "mask_zero_instead_of_inf": {"masking", "softmax", "attention"},
    "softmax_no_normalise": {"softmax", "masking", "attention"},
    "grad_a_no_transpose": {"grad_weighted_sum"},
    "softmax_grad_sign": {"grad_softmax", "backprop"},
    "softmax_grad_diagonal_only": {"grad_softmax", "backprop"},
    "grad_q_transposed": {"grad_scores", "backprop"},
    # the scaling variants and the mistakes on the path to G_X
    "scaled_times_sqrt_dk": {"scaling", "attention"},
    "scaled_by_sqrt_d_model": set(),  # attention never has √d_model apart from d_k and d_k²; multi_head names it per head
    "grad_scores_times_sqrt_dk": {"grad_scores", "backprop"},
    **{mid: {"grad_projections", "backprop"} for mid in GRAD_X_PATH_MISTAKES},
    "grad_x_v_no_transpose": {"grad_value_proj"},  # a square W_V (level 1): G_V W_V conforms
    # cross-attention and padding masks
    "cross_keys_from_queries": {"cross_attention"}, "cross_causal_mask": {"cross_attention"},
    "padding_on_queries": {"padding_mask"}, "padding_ignored": {"padding_mask"},
    "padding_after_softmax": {"padding_mask"}, "padding_empty_row_uniform": {"padding_mask"},
    # a sliding window's mask
    **{mid: {"sliding_window"} for mid in ("window_too_wide", "window_too_narrow", "window_sinks_forgotten",
                                           "window_looks_ahead")},
    # the attention block's norm and residual
    **{mid: {"attention_block"} for mid in ("norm_over_columns", "norm_variance_unbiased", "residual_forgotten",
                                            "norm_after_residual")},
    # the online softmax's running values
    **{mid: {"online_softmax"} for mid in ("online_no_rescale", "online_rescale_inverted", "online_divide_per_tile",
                                           "online_tile_max")},
    # ALiBi's slopes and bias, temperature and the soft cap
    **{mid: {"alibi"} for mid in ("alibi_slope_off_by_one", "alibi_not_causal", "alibi_bias_sign",
                                  "alibi_bias_after_softmax", "alibi_bias_scaled")},
    **{mid: {"temperature"} for mid in ("temperature_times_tau", "temperature_cap_after_softmax",
                                        "temperature_cap_forgotten")},
}
DESIGN_IDS = ("transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle",
              "no_mask", "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed",
              "grad_a_transposed", "grad_v_no_transpose", "softmax_grad_missing_term", "grad_scores_no_scale",
              "grad_k_no_transpose", "embedding_grad_no_accumulate")


def exercise(kind: str, level: int, seed: int) -> Exercise:
    return generated.exercise(kind, seed, level)


def reference_answer(ex: Exercise) -> dict[str, np.ndarray | int]:
    """Every part's reference: a matrix, or an option index for a multiple-choice part."""
    return {p.name: int(p.reference[0, 0]) if p.is_choice else np.array(p.reference) for p in ex.parts}


def rounded(value: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(value, dtype=float), 2)  # −∞ stays −∞


# ---------------------------------------------------------------- the catalog itself


def test_catalog_holds_design_ids_first_then_the_extra_ones():
    assert misconceptions.CATALOG[:len(DESIGN_IDS)] == DESIGN_IDS
    assert set(misconceptions.CATALOG) == set(EXPECTED_KINDS)
    assert len(set(misconceptions.CATALOG)) == len(misconceptions.CATALOG)


@pytest.mark.parametrize("lang", languages())
def test_every_id_is_explained_in_one_or_two_sentences(lang):
    texts = catalog(lang)
    for mid in misconceptions.CATALOG:
        text = texts.get(f"misconception.{mid}")
        assert text, (lang, mid)
        ends = sum(text.count(mark) for mark in (". ", "。")) + 1
        assert ends <= 3, (lang, mid, text)  # "It looks like …" plus the concept, at most a third clause


# ---------------------------------------------------------------- diagnosis over every kind


@pytest.mark.parametrize("kind,level", CASES)
def test_every_mistake_is_named_exact_and_rounded_and_the_right_answer_never(kind, level):
    for seed in SEEDS:
        ex = exercise(kind, level, seed)
        right = reference_answer(ex)
        for answer in (right, {name: rounded(v) if ex.part(name).decimals >= 2 else v for name, v in right.items()
                               if not ex.part(name).is_choice} | {p.name: right[p.name] for p in ex.parts if p.is_choice}):
            fb = exercises.grade(ex, answer)
            assert fb.correct and fb.misconception is None, (kind, level, seed)
            assert all(p.misconception is None for p in fb.parts.values())
        for mid, values in misconceptions.alternatives(ex).items():
            for name, alt in values.items():
                for shown in (alt, rounded(alt)):
                    fb = exercises.grade(ex, {**right, name: shown})
                    part = fb.parts[name]
                    assert fb.graded and not part.correct, (kind, level, seed, mid, name)
                    assert part.misconception == mid, (kind, level, seed, mid, name, part.misconception)
            # the whole wrong chain, as a learner making that one mistake would write it
            fb = exercises.grade(ex, {**right, **{name: rounded(v) for name, v in values.items()}})
            assert {fb.parts[name].misconception for name in values} == {mid}, (kind, level, seed, mid)
            assert fb.misconception == mid


@cache
def coverage() -> dict[str, set[tuple[str, int]]]:
    found: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for kind, level in CASES:
        for seed in SEEDS:
            for mid in misconceptions.alternatives(exercise(kind, level, seed)):
                found[mid].add((kind, level))
    return found


@pytest.mark.parametrize("mid", misconceptions.CATALOG)
def test_every_id_applies_in_the_kinds_whose_step_it_belongs_to(mid):
    kinds = {kind for kind, _ in coverage()[mid]}
    assert EXPECTED_KINDS[mid] <= kinds, (mid, sorted(kinds))


@pytest.mark.parametrize("kind,level", CASES)
def test_variants_keep_every_mistake_apart(kind, level):
    """No applicable mistake gives the reference, and no two give the same answer to a part — by
    more than the grading tolerance plus the rounding a learner may do."""
    for seed in SEEDS:
        ex = exercise(kind, level, seed)
        alts = misconceptions.alternatives(ex)
        assert misconceptions.collisions(ex) == [], (kind, level, seed)
        for mid, values in alts.items():
            for name, alt in values.items():
                part = ex.part(name)
                assert not np.isnan(alt).any()
                with np.errstate(invalid="ignore"):  # −∞ − (−∞)
                    gap = np.where(np.isinf(alt) | np.isinf(part.reference),
                                   np.where(alt == part.reference, 0.0, np.inf), np.abs(alt - part.reference))
                assert gap.max() > part.tolerance + misconceptions.ROUNDING, (kind, level, seed, mid, name)
                for other, other_values in alts.items():
                    if other != mid and name in other_values:
                        assert misconceptions.apart(alt, other_values[name], misconceptions.separation(part))


# ---------------------------------------------------------------- each new mistake, by hand


def run_with(given: dict, mistake: str, name: str) -> np.ndarray:
    env = pipeline.run(given, mistakes={mistake})
    assert mistake in env.used and name in env.tainted
    return env[name]


def test_scores_not_transposed_is_q_times_k():
    Q, K = np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 1.0]])
    np.testing.assert_array_equal(run_with({"Q": Q, "K": K}, "scores_not_transposed", "scores"), [[3, 2], [1, 1]])
    np.testing.assert_array_equal(pipeline.run({"Q": Q, "K": K})["scores"], [[1, 3], [0, 1]])
    env = pipeline.run({"Q": np.ones((3, 2)), "K": np.ones((3, 2))}, mistakes={"scores_not_transposed"})
    assert not env.used, "Q K does not fit when d_k ≠ n: the mistake cannot be made"


def test_mask_zero_instead_of_inf_writes_zeros_and_the_softmax_keeps_future_weight():
    scaled = np.array([[1.0, 2.0], [3.0, 4.0]])
    given = {"scaled": scaled, "causal": True}
    np.testing.assert_array_equal(run_with(given, "mask_zero_instead_of_inf", "masked"), [[1, 0], [3, 4]])
    A = run_with(given, "mask_zero_instead_of_inf", "A")
    e = np.e
    np.testing.assert_allclose(A[0], [e / (e + 1), 1 / (e + 1)])
    given_masked = {"masked": np.array([[1.0, -np.inf], [3.0, 4.0]]), "causal": True}  # the softmax kind's input
    np.testing.assert_allclose(run_with(given_masked, "mask_zero_instead_of_inf", "A")[0], [e / (e + 1), 1 / (e + 1)])
    assert not pipeline.run({"scaled": scaled, "causal": False}, mistakes={"mask_zero_instead_of_inf"}).used


def test_softmax_no_normalise_is_the_bare_exponential():
    z = np.array([[0.0, 1.0], [2.0, -np.inf]])
    np.testing.assert_allclose(run_with({"masked": z, "causal": True}, "softmax_no_normalise", "A"),
                               [[1, np.e], [np.e**2, 0]])


def test_grad_a_no_transpose_on_the_golden_example():
    given = {"A": np.array([[0.5, 0.5]]), "V": np.array([[2.0, 4.0], [6.0, 8.0]]), "G_O": np.array([[1.0, 2.0]])}
    np.testing.assert_array_equal(pipeline.run(given)["G_A"], [[10, 22]])  # DESIGN §10
    np.testing.assert_array_equal(run_with(given, "grad_a_no_transpose", "G_A"), [[14, 20]])
    np.testing.assert_array_equal(run_with(given, "grad_a_transposed", "G_A"), [[10], [22]])


def test_softmax_gradient_mistakes_by_hand():
    given = {"A": np.array([[0.5, 0.5]]), "G_A": np.array([[1.0, 3.0]])}
    # r = ½·1 + ½·3 = 2, so G = [½(1 − 2), ½(3 − 2)]
    np.testing.assert_allclose(pipeline.run(given)["G_scaled"], [[-0.5, 0.5]])
    np.testing.assert_allclose(run_with(given, "softmax_grad_sign", "G_scaled"), [[0.5, -0.5]])
    np.testing.assert_allclose(run_with(given, "softmax_grad_diagonal_only", "G_scaled"), [[0.25, 0.75]])
    np.testing.assert_allclose(run_with(given, "softmax_grad_missing_term", "G_scaled"), [[0.5, 1.5]])


def test_grad_q_transposed_is_the_transposed_scores_gradient_times_k():
    G_S = np.array([[1.0, 2.0], [0.0, 3.0]])
    K, Q = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 1.0], [2.0, 0.0]])
    given = {"G_scores": G_S, "K": K, "Q": Q}
    np.testing.assert_array_equal(pipeline.run(given)["G_Q"], G_S @ K)
    np.testing.assert_array_equal(run_with(given, "grad_q_transposed", "G_Q"), [[1, 0], [2, 3]])


def test_scaling_the_wrong_way_by_hand():
    S = np.array([[2.0, -4.0], [1.0, 0.0]])
    given = {"scores": S, "d_k": 4}
    np.testing.assert_array_equal(pipeline.run(given)["scaled"], [[1, -2], [0.5, 0]])
    np.testing.assert_array_equal(run_with(given, "scaled_times_sqrt_dk", "scaled"), [[4, -8], [2, 0]])
    assert not pipeline.run({**given, "d_k": 1}, mistakes={"scaled_times_sqrt_dk"}).used  # √1: nothing to tell
    # √d_model needs X on the way: d_model = 2 (the rows of W_Q), d_k = 4
    X, W = np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0]])
    given = {"X": X, "W_Q": W, "W_K": W, "W_V": W, "d_k": 4}
    ref = pipeline.run(given)
    np.testing.assert_allclose(run_with(given, "scaled_by_sqrt_d_model", "scaled"), ref["scores"] / np.sqrt(2))
    assert not pipeline.run({"scores": S, "d_k": 4}, mistakes={"scaled_by_sqrt_d_model"}).used  # no X: no d_model
    same = {**given, "W_Q": W[:, :2], "W_K": W[:, :2], "W_V": W[:, :2], "d_k": 2}  # d_model = d_k = 2
    assert not pipeline.run(same, mistakes={"scaled_by_sqrt_d_model"}).used


def test_grad_scores_times_sqrt_dk_by_hand():
    given = {"G_scaled": np.array([[1.0, -1.0], [0.0, 2.0]]), "d_k": 4}
    np.testing.assert_array_equal(pipeline.run(given)["G_scores"], [[0.5, -0.5], [0, 1]])
    np.testing.assert_array_equal(run_with(given, "grad_scores_times_sqrt_dk", "G_scores"), [[2, -2], [0, 4]])
    assert not pipeline.run({**given, "d_k": 1}, mistakes={"grad_scores_times_sqrt_dk"}).used


@pytest.mark.parametrize("mid,kept", GRAD_X_PATH_MISTAKES.items())
def test_g_x_over_some_of_the_paths_by_hand(mid, kept):
    rng = np.random.default_rng(3)
    given = {f"{m}_{p}": rng.integers(-2, 3, (3, 2) if m == "G" else (2, 2)).astype(float)
             for m in ("G", "W") for p in "QKV"}
    paths = {p: given[f"G_{p}"] @ given[f"W_{p}"].T for p in "QKV"}  # (n, d) each
    np.testing.assert_array_equal(pipeline.run(given)["G_X"], paths["Q"] + paths["K"] + paths["V"])
    np.testing.assert_array_equal(run_with(given, mid, "G_X"), sum(paths[p] for p in kept))


MANY_SEEDS = range(60)
NEW_MISTAKES = ("scaled_times_sqrt_dk", "grad_scores_times_sqrt_dk", *GRAD_X_PATH_MISTAKES)
OWN_KINDS = ("scaling", "grad_scores", "grad_projections")  # the kinds whose own helper uses them


@pytest.mark.parametrize("kind", OWN_KINDS)
def test_the_new_mistakes_are_named_exact_and_rounded_over_many_seeds(kind):
    named: set[str] = set()
    for level in exercises.KINDS[kind].LEVELS:
        for seed in MANY_SEEDS:
            ex = exercise(kind, level, seed)
            right = reference_answer(ex)
            fb = exercises.grade(ex, {name: rounded(v) for name, v in right.items()})
            assert fb.correct and fb.misconception is None, (kind, level, seed)
            assert misconceptions.collisions(ex, guards=NEW_MISTAKES) == [], (kind, level, seed)
            for mid, values in misconceptions.alternatives(ex, NEW_MISTAKES).items():
                for name, alt in values.items():
                    for shown in (alt, rounded(alt)):
                        part = exercises.grade(ex, {**right, name: shown}).parts[name]
                        assert not part.correct and part.misconception == mid, (kind, level, seed, mid, name)
                named.add(mid)
    assert named == {mid for mid in NEW_MISTAKES if kind in EXPECTED_KINDS[mid]}


def test_forgetting_the_transpose_in_g_v_w_v_is_diagnosed():
    """A learner who writes G_V W_V for the value path's share of G_X is told so: on a
    hand-checked case and on every level-1 grad_value_proj variant (W_V square), exact and rounded."""
    given = {"G_V": np.array([[1.0, 2.0], [0.0, -1.0]]), "W_V": np.array([[1.0, 0.0], [1.0, -1.0]])}
    np.testing.assert_array_equal(run_with(given, "grad_x_v_no_transpose", "G_X_V"), [[3.0, -2.0], [-1.0, 1.0]])
    np.testing.assert_array_equal(pipeline.run(given)["G_X_V"], [[1.0, -1.0], [0.0, 1.0]])  # G_V W_Vᵀ
    assert not pipeline.run({**given, "W_V": np.ones((2, 1)), "G_V": np.ones((2, 1))},
                            mistakes={"grad_x_v_no_transpose"}).used  # not conformable: not made
    for seed in range(30):
        ex = exercise("grad_value_proj", 1, seed)
        right = reference_answer(ex)
        wrong = ex.given["G_V"] @ ex.given["W_V"]  # (n, d): the transpose forgotten
        for shown in (wrong, rounded(wrong)):
            fb = exercises.grade(ex, {**right, "G_X_V": shown})
            assert not fb.parts["G_X_V"].correct and fb.parts["G_X_V"].misconception == "grad_x_v_no_transpose", seed


# ---------------------------------------------------------------- the mechanism's edges


def one_part_exercise(given: dict, name: str, decimals: int = 2) -> Exercise:
    reference = pipeline.run(given)[name]
    return Exercise(kind="scores", seed=0, level=1, version=1, given=given,
                    parts=(Part(name=name, shape=reference.shape, reference=reference, decimals=decimals),))


def test_a_symmetric_score_matrix_collides_and_is_reported():
    Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    ex = one_part_exercise({"Q": Q, "K": Q}, "scores", decimals=0)
    found = dict(misconceptions.collisions(ex))
    assert found.get("transposed_scores") == "scores"


def test_two_mistakes_with_the_same_answer_collide():
    """Upper triangle of zeros: leaving the mask out and writing 0 instead of −∞ look the same."""
    scaled = np.array([[1.0, 0.0], [2.0, 3.0]])
    ex = one_part_exercise({"scaled": scaled, "causal": True}, "masked")
    assert ("no_mask+mask_zero_instead_of_inf", "masked") in misconceptions.collisions(ex)


def test_a_gap_within_rounding_is_not_enough():
    """0.335 and 0.3295 differ by more than the tolerance, but 0.3295 rounds to 0.33, which is right
    for 0.335: such a mistake could not be named when rounded, so it counts as a collision."""
    part = Part(name="A", shape=(1, 1), reference=np.array([[0.335]]))
    assert not misconceptions.apart(np.array([[0.3295]]), part.reference, misconceptions.separation(part))
    assert misconceptions.apart(np.array([[0.32]]), part.reference, misconceptions.separation(part))
    assert misconceptions.apart(np.array([[-np.inf]]), np.array([[0.0]]), 1.0)
    assert not misconceptions.apart(np.array([[-np.inf]]), np.array([[-np.inf]]), 0.0)


def test_a_mistake_that_gives_nan_is_not_offered():
    """Masking the diagonal too leaves row 1 with nothing but −∞: its softmax is 0/0, not an answer."""
    given = {"scaled": np.array([[1.0, 2.0], [3.0, 4.0]]), "causal": True}
    env = pipeline.run(given, mistakes={"mask_diagonal"})
    assert np.isnan(env["A"]).any()
    ref = pipeline.run(given)
    ex = Exercise(kind="masking", seed=0, level=2, version=1, given=given,
                  parts=(Part(name="masked", shape=(2, 2), reference=ref["masked"]),
                         Part(name="A", shape=(2, 2), reference=ref["A"])))
    offered = misconceptions.alternatives(ex)["mask_diagonal"]
    assert set(offered) == {"masked"}


def test_diagnosis_uses_the_rounding_tolerance_only_for_naming():
    """0.33 for 1/3 is graded right (no mistake named); the same answer is never a misconception."""
    ex = exercise("softmax", 2, 4)
    fb = exercises.grade(ex, {"A": rounded(ex.part("A").reference)})
    assert fb.correct and fb.misconception is None





BACKWARD = ["grad_weighted_sum", "grad_value_proj", "grad_softmax", "grad_scores", "grad_projections",
            "grad_embedding"]  # backprop: tests/kinds/test_backprop.py


KIND_LEVELS = [(k, level) for k in BACKWARD for level in (1, 2, 3)]


BACKWARD_MISTAKES = ["grad_a_transposed", "grad_v_no_transpose", "softmax_grad_missing_term",
                     "grad_scores_no_scale", "grad_k_no_transpose", "embedding_grad_no_accumulate"]


@pytest.mark.parametrize("mistake", BACKWARD_MISTAKES)
def test_each_backward_mistake_is_named_where_it_applies(mistake):
    named = 0
    for kind_id, level in KIND_LEVELS:
        for seed in range(3):
            ex = exercises.generate(kind_id, seed, level)
            alt = misconceptions.alternatives(ex).get(mistake)
            if not alt:
                continue
            answers = {p.name: alt.get(p.name, p.reference) for p in ex.parts}
            fb = exercises.grade(ex, answers)
            assert not fb.correct
            assert mistake in {p.misconception for p in fb.parts.values()}, (kind_id, level, seed)
            named += 1
    assert named >= 3, mistake


RNG_SEED = 14


def plain_clashes(reference, alts, gap):
    """clashes() pair by pair, cell by cell: −∞ only near −∞ (and +∞ near +∞), NaN values left out."""
    def near(a, b):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if a.shape != b.shape:
            return False
        for x, y in zip(a.ravel(), b.ravel()):
            if np.isnan(x) or np.isnan(y):  # (a NaN in the reference: nothing is near it)
                return False
            if np.isinf(x) or np.isinf(y):
                if not (np.isinf(x) and np.isinf(y) and np.sign(x) == np.sign(y)):
                    return False
            elif abs(x - y) > gap:
                return False
        return True

    usable = [(mid, alt) for mid, alt in alts.items() if not np.isnan(alt).any()]
    found = [mid for mid, alt in usable if near(alt, reference)]
    found += [f"{a}+{b}" for (a, x), (b, y) in itertools.combinations(usable, 2) if near(x, y)]
    return found


def random_value(rng, shape, base=None):
    """A value near `base` (or anywhere), some cells −∞, +∞ or NaN now and then."""
    value = (np.array(base, dtype=float) if base is not None else rng.integers(-3, 4, size=shape).astype(float))
    value = value + rng.choice([0.0, 0.0, 0.004, -0.009, 0.02, 1.0], size=shape)
    for special in (-np.inf, np.inf, np.nan):
        if rng.random() < 0.15:
            value[tuple(rng.integers(s) for s in shape)] = special
    return value


@pytest.mark.parametrize("mixed_shapes", [False, True])
def test_clashes_and_any_clash_agree_with_the_plain_pairwise_comparison(mixed_shapes):
    rng = np.random.default_rng(RNG_SEED)
    gap = misconceptions.GAP
    for _ in range(600):
        shape = tuple(int(s) for s in rng.integers(1, 4, size=2))
        reference = random_value(rng, shape)
        if rng.random() < 0.3:
            reference[0, 0] = -np.inf
        alts = {}
        for k in range(int(rng.integers(0, 7))):
            base = reference if rng.random() < 0.4 else None
            other = shape if not (mixed_shapes and rng.random() < 0.4) else (shape[1], shape[0] + 1)
            alts[f"m{k}"] = random_value(rng, other, base if other == shape else None)
        expected = plain_clashes(reference, alts, gap)
        assert misconceptions.clashes(reference, alts, gap) == expected
        assert misconceptions.any_clash(reference, alts, gap) == bool(expected)


@pytest.mark.parametrize("kind_id", ["attention", "masking", "softmax", "backprop", "grad_projections", "scaling"])
def test_collides_is_whether_there_are_collisions(kind_id):
    kind = exercises.KINDS[kind_id]
    for level in kind.LEVELS:
        def make(given, parts, params, level=level):
            return exercises.Exercise(kind=kind_id, seed=0, level=level, version=kind.VERSION, given=given,
                                      parts=tuple(parts), params=params)

        seen = sampler.candidates(kind, exercises.rng_for(kind_id, 777, level), level, make)
        for _, ex in zip(range(8), seen):  # drafts as the engine sees them, colliding ones included
            fresh = make(ex.given, ex.parts, ex.params)
            assert misconceptions.collides(ex, kind.GUARDS) == bool(misconceptions.collisions(fresh, kind.GUARDS))


def test_clash_decides_as_clashes():
    rng = np.random.default_rng(3)
    for _ in range(400):
        shape = (2, int(rng.integers(1, 4)))
        ref = rng.integers(-2, 3, shape).astype(float)
        values = [ref + rng.choice([0.0, 0.004, 0.02, 1.0], shape) for _ in range(int(rng.integers(1, 5)))]
        if rng.random() < 0.2:
            values[0] = np.where(rng.random(shape) < 0.5, -np.inf, values[0])
        if rng.random() < 0.1:
            values[-1] = np.full(shape, np.nan)
        gap = misconceptions.GAP
        alts = {str(i): v for i, v in enumerate(values)}
        assert misconceptions.any_clash(ref, values, gap) == bool(misconceptions.clashes(ref, alts, gap))
        assert misconceptions.any_clash(ref, alts, gap) == bool(misconceptions.clashes(ref, alts, gap))


def test_every_mistake_id_has_one_home_and_its_texts():
    """One list of mistake ids: the step records' and each kind's own declaration (MISTAKES). A kind's own
    mistakes its batches keep apart are declared; every mistake a kind explains in its texts is in the
    list; every id has its explanation in each language."""
    from exercises.core import engine
    from exercises.i18n import catalog, languages

    ids = engine.mistake_ids()
    assert len(ids) == len(set(ids)), [m for m in ids if ids.count(m) > 1]
    for lang in languages():
        missing = [m for m in ids if f"misconception.{m}" not in catalog(lang)]
        assert not missing, (lang, missing)
    for kind_id, kind in exercises.KINDS.items():
        if kind.folder is None or kind_id == "concepts":  # concepts explains its options, not mistakes
            continue
        texts = json.loads((kind.folder / "locales" / "en.json").read_text(encoding="utf-8"))
        explained = {k.split(".", 1)[1] for k in texts if k.startswith("misconception.")}
        assert explained <= set(ids), (kind_id, sorted(explained - set(ids)))
        if kind.draw is not None:
            for level in kind.LEVELS:
                batch = kind.draw(exercises.rng_for(kind_id, 0, level), level)
                undeclared = set(batch.own) - set(kind.MISTAKES) - set(misconceptions.CATALOG)
                assert not undeclared, (kind_id, level, sorted(undeclared))


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_diagnosis_names_what_diagnose_names(kind):
    rng = np.random.default_rng(8)
    for level in exercises.KINDS[kind].LEVELS:
        for seed in range(2):
            ex = generated.exercise(kind, seed, level)
            mistaken = list(misconceptions.alternatives(exercises.Exercise.from_dict(ex.to_dict())).values())
            candidates = [*mistaken, *near_answers(ex, rng)]
            for values in candidates:
                for part in ex.parts:
                    if part.is_choice or part.name not in values:
                        continue
                    value = np.asarray(values[part.name], dtype=float)
                    if misconceptions.matches(value, part.reference, part.tolerance):
                        continue  # right: grading diagnoses only a part that is not
                    fresh = exercises.Exercise.from_dict(ex.to_dict())  # nothing memoised
                    want = misconceptions.diagnose(ex, part, value)
                    assert grading._diagnosis(fresh, part, value) == want, (kind, level, seed, part.name)


def test_every_mistake_has_a_short_name_for_progress_and_the_gradebook():
    """The lists of mistakes made read alike: every id has a short label (progress.mistake.<id>), not its
    whole explanation, in every language."""
    from exercises.core import engine
    from exercises.i18n import catalog, languages

    for lang in languages():
        missing = [m for m in engine.mistake_ids() if f"progress.mistake.{m}" not in catalog(lang)]
        assert not missing, (lang, missing)
        long = [m for m in engine.mistake_ids() if len(catalog(lang)[f"progress.mistake.{m}"]) > 80]
        assert not long, (lang, long)
