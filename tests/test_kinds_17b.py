"""Issue 17 (W17b): the softmax Jacobian, positional encodings and multi-head backward.

Each kind against an independent NumPy computation (forward) or central finite differences
(backward), over 50 seeds per level; every named mistake diagnosed, exactly and rounded to 2
decimals; a careful student who rounds each value they write (and computes on from it) graded right.
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core import softmax
from attention_core.ops import softmax_jacobian, softmax_jacobian_loop
from exercises.core import grading
from exercises.core.numbers import round_half_up

SEEDS = range(50)
H = 1e-5


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


# ---------------------------------------------------------------- the softmax Jacobian


def assert_careful_students_are_right(kind: str, level: int, student) -> None:
    """A careful student of `kind` who rounds to 2 places, to 3, or not at all is right on every seed."""
    for seed in SEEDS:
        ex = exercises.generate(kind, seed, level)
        for places in (2, 3, None):
            assert graded_right(ex, student(ex, places)), (ex.id, places)


def named_mistakes(kind: str, level: int, mistakes_of) -> set[str]:
    """Every mistake `mistakes_of(ex, part)` gives, exact and rounded to 2 places, is named as itself; the ids seen."""
    named = set()
    for seed in SEEDS:
        ex = exercises.generate(kind, seed, level)
        right = {p.name: p.reference for p in ex.parts}
        for part in ex.parts:
            for mid, alt in mistakes_of(ex, part.name).items():
                for value in (alt, round_half_up(alt, 2)):
                    assert misconception(ex, {**right, part.name: value}) == mid, (ex.id, part.name, mid)
                named.add(mid)
    return named


@pytest.mark.parametrize("seed", range(20))
def test_softmax_jacobian_matches_finite_differences_and_the_loop(seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(1, int(rng.integers(2, 7)))) * 3
    J = softmax_jacobian(z)
    np.testing.assert_allclose(J, central_difference(lambda x: softmax(x), z), atol=1e-8)
    np.testing.assert_allclose(J, softmax_jacobian_loop(z), atol=1e-15)
    np.testing.assert_allclose(J.sum(axis=1), 0, atol=1e-12)  # the weights always sum to 1


@pytest.mark.parametrize("level", (1, 2, 3))
def test_softmax_jacobian_references_are_numpy_s(level):
    for seed in SEEDS:
        ex = exercises.generate("softmax_jacobian", seed, level)
        z, root = ex.given["z"], np.sqrt(ex.given["d_k"])
        for name, value in (("a", softmax(z)), ("J", softmax_jacobian(z)), ("a_scaled", softmax(z / root)),
                            ("J_scaled", softmax_jacobian(z / root))):
            np.testing.assert_allclose(ex.part(name).reference, value, atol=1e-12, err_msg=f"{ex.id} {name}")
        # the sharper row passes back less: its largest entry is visibly smaller
        assert np.abs(ex.part("J").reference).max() + 0.02 <= np.abs(ex.part("J_scaled").reference).max() + 1e-12


def _jacobian_student(ex, places):
    a = round_half_up(softmax(ex.given["z"]), places)
    a_s = round_half_up(softmax(ex.given["z"] / np.sqrt(ex.given["d_k"])), places)
    return {"a": a, "J": round_half_up(np.diag(a.ravel()) - np.outer(a, a), places),
            "a_scaled": a_s, "J_scaled": round_half_up(np.diag(a_s.ravel()) - np.outer(a_s, a_s), places)}


@pytest.mark.parametrize("level", (1, 2, 3))
def test_softmax_jacobian_careful_student_who_rounds_is_right(level):
    assert_careful_students_are_right("softmax_jacobian", level, _jacobian_student)


@pytest.mark.parametrize("level", (1, 2, 3))
def test_softmax_jacobian_mistakes_are_named_exact_and_rounded(level):
    from exercises.kinds import softmax_jacobian as K

    named = named_mistakes("softmax_jacobian", level, lambda ex, part: K.mistakes_of(ex.given["z"], ex.given["d_k"], part))
    assert {"jacobian_diagonal_only", "jacobian_off_diagonal_sign", "jacobian_no_diagonal",
            "jacobian_unscaled_weights", "no_scaling"} <= named


def test_softmax_jacobian_a_wrong_weight_carries_into_its_jacobian():
    ex = exercises.generate("softmax_jacobian", 0, 2)
    answer = _jacobian_student(ex, 2)
    a = answer["a"].copy()
    a[0, 0] += 0.1  # a wrong weight; J computed from it is consistent, not right
    answer = {**answer, "a": a, "J": np.diag(a.ravel()) - np.outer(a, a)}
    fb = exercises.grade(ex, answer)
    assert not fb.correct
    assert (fb.parts["J"].status == grading.CONSISTENT).any()


# ---------------------------------------------------------------- multi-head backward


@pytest.mark.parametrize("seed", range(20))
def test_multi_head_output_backward_matches_finite_differences(seed):
    from attention_core.multi_head import head_output_backward, output_projection_backward, split_heads

    rng = np.random.default_rng(seed)
    n, h, d_v, d_out = (int(rng.integers(2, 5)) for _ in range(4))
    A = [softmax(rng.normal(size=(n, n))) for _ in range(h)]
    V = [rng.normal(size=(n, d_v)) for _ in range(h)]
    W_O, G_out = rng.normal(size=(h * d_v, d_out)), rng.normal(size=(n, d_out))

    def loss(V1, W):
        concat = np.concatenate([A[0] @ V1] + [a @ v for a, v in zip(A[1:], V[1:])], axis=1)
        return np.sum((concat @ W) * G_out)

    concat = np.concatenate([a @ v for a, v in zip(A, V)], axis=1)
    G_concat, G_W_O = output_projection_backward(concat, W_O, G_out)
    np.testing.assert_allclose(G_W_O, central_difference(lambda W: loss(V[0], W), W_O).reshape(W_O.shape),
                               atol=1e-7)
    np.testing.assert_allclose(G_concat, central_difference(lambda C: np.sum((C @ W_O) * G_out), concat)
                               .reshape(concat.shape), atol=1e-7)
    G_O1 = split_heads(G_concat, [d_v] * h)[0]
    G_V1 = head_output_backward(A[0], V[0], G_O1)[1]
    np.testing.assert_allclose(G_V1, central_difference(lambda v: loss(v, W_O), V[0]).reshape(V[0].shape), atol=1e-7)


@pytest.mark.parametrize("level", (1, 2, 3))
def test_grad_multi_head_references_are_numpy_s_and_the_given_heads_agree(level):
    for seed in SEEDS:
        ex = exercises.generate("grad_multi_head", seed, level)
        g = ex.given
        h = sum(1 for k in g if k.startswith("A") and k[1:].isdigit())
        np.testing.assert_allclose(g["concat"], np.hstack([g[f"A{i}"] @ g[f"V{i}"] for i in range(1, h + 1)]))
        np.testing.assert_allclose(g["A1"].sum(axis=1), 1)
        G_concat = g["G_out"] @ g["W_O"].T
        d_v = g["V1"].shape[1]
        np.testing.assert_allclose(ex.part("G_concat").reference, G_concat)
        np.testing.assert_allclose(ex.part("G_W_O").reference, g["concat"].T @ g["G_out"])
        for i in range(1, h + 1):
            np.testing.assert_allclose(ex.part(f"G_O{i}").reference, G_concat[:, (i - 1) * d_v:i * d_v])
        np.testing.assert_allclose(ex.part("G_V1").reference, g["A1"].T @ G_concat[:, :d_v])


def _mh_student(ex, places):
    g = ex.given
    d_v = g["V1"].shape[1]
    G_concat = round_half_up(g["G_out"] @ g["W_O"].T, places)
    answer = {"G_concat": G_concat, "G_W_O": round_half_up(g["concat"].T @ g["G_out"], places),
              "G_V1": round_half_up(g["A1"].T @ G_concat[:, :d_v], places)}
    for p in ex.parts:
        if p.name.startswith("G_O"):
            i = int(p.name[3:])
            answer[p.name] = G_concat[:, (i - 1) * d_v:i * d_v]
    return answer


@pytest.mark.parametrize("level", (1, 2, 3))
def test_grad_multi_head_careful_student_who_rounds_is_right(level):
    assert_careful_students_are_right("grad_multi_head", level, _mh_student)


@pytest.mark.parametrize("level", (1, 2, 3))
def test_grad_multi_head_mistakes_are_named_exact_and_rounded(level):
    from exercises.kinds import grad_multi_head as K

    named = named_mistakes("grad_multi_head", level, lambda ex, part: K.mistakes_of(ex.given, part))
    assert {"grad_mh_wrong_head", "grad_mh_w_o_not_summed", "grad_v_no_transpose"} <= named
    if level < 3:  # W_O is square: its transposes have the right shape
        assert {"grad_mh_concat_no_transpose", "grad_mh_skips_w_o", "grad_mh_w_o_transposed"} <= named


def test_grad_multi_head_a_wrong_g_concat_carries_into_the_heads():
    ex = exercises.generate("grad_multi_head", 0, 2)
    answer = _mh_student(ex, 2)
    G_concat = answer["G_concat"].copy()
    G_concat[0, 0] += 1
    d_v = ex.given["V1"].shape[1]
    answer = {**answer, "G_concat": G_concat, "G_O1": G_concat[:, :d_v],
              "G_V1": ex.given["A1"].T @ G_concat[:, :d_v]}
    fb = exercises.grade(ex, answer)
    assert not fb.correct
    assert (fb.parts["G_O1"].status == grading.CONSISTENT).any()
    assert (fb.parts["G_V1"].status == grading.CONSISTENT).any()


# ---------------------------------------------------------------- positional encodings


def test_sinusoidal_encoding_is_the_papers_formula():
    from attention_core.positions import sinusoidal

    P = sinusoidal(np.arange(5), 6)
    for p in range(5):
        for i in range(3):
            w = 10000 ** (-2 * i / 6)
            assert P[p, 2 * i] == pytest.approx(np.sin(p * w)) and P[p, 2 * i + 1] == pytest.approx(np.cos(p * w))


@pytest.mark.parametrize("seed", range(20))
def test_attention_without_positions_commutes_with_a_permutation(seed):
    from exercises.kinds.positional import attend

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(int(rng.integers(2, 6)), 4))
    perm = rng.permutation(X.shape[0])
    np.testing.assert_allclose(attend(X[perm]), attend(X)[perm], atol=1e-12)
    from attention_core.positions import sinusoidal
    P = sinusoidal(np.arange(X.shape[0]), 4)
    if not np.array_equal(perm, np.arange(X.shape[0])):  # with positions it no longer does
        assert not np.allclose(attend(X[perm] + P), attend(X + P)[perm])


@pytest.mark.parametrize("level", (1, 2, 3))
def test_positional_references_are_numpy_s(level):
    from attention_core import self_attention

    for seed in SEEDS:
        ex = exercises.generate("positional", seed, level)
        g = ex.given
        n, d = g["X"].shape
        P = np.array([[np.sin(p * 10000 ** (-2 * (c // 2) / d)) if c % 2 == 0 else np.cos(p * 10000 ** (-2 * (c // 2) / d))
                       for c in range(d)] for p in g["pos"]])
        np.testing.assert_allclose(ex.part("P").reference, P, atol=1e-12)
        np.testing.assert_allclose(ex.part("X_P").reference, g["X"] + P, atol=1e-12)
        for a in np.outer(g["pos"], 10000 ** (-2 * np.arange(d // 2) / d)).ravel():
            assert f"{a:g}" in ex.params["table"]
        if level > 1:
            eye = np.eye(d)
            O = self_attention(g["X"], eye, eye, eye).O
            np.testing.assert_allclose(ex.part("O").reference, O, atol=1e-12)
            perm = g["perm"].astype(int)
            np.testing.assert_allclose(ex.part("O_perm").reference, O[perm], atol=1e-12)


def _positional_student(ex, places):
    from exercises.core import pipeline
    from exercises.kinds.positional import attention_given

    g = ex.given
    P = round_half_up(ex.part("P").reference, places)
    answer = {"P": P, "X_P": round_half_up(g["X"] + P, places)}
    if "perm" in g:
        O = pipeline.run(attention_given(g["X"]), rounding=places)["O"]
        answer.update(O=O, O_perm=O[g["perm"].astype(int)])
    return answer


@pytest.mark.parametrize("level", (1, 2, 3))
def test_positional_careful_student_who_rounds_is_right(level):
    assert_careful_students_are_right("positional", level, _positional_student)


def test_positional_table_reader_rounding_to_three_places_is_right():
    """A student who reads sin and cos off the 3-decimal table and rounds P to 2 places."""
    for level in (1, 2, 3):
        for seed in range(10):
            ex = exercises.generate("positional", seed, level)
            P = round_half_up(round_half_up(ex.part("P").reference, 3), 2)
            answer = {**_positional_student(ex, 2), "P": P, "X_P": ex.given["X"] + P}
            assert graded_right(ex, answer), ex.id


@pytest.mark.parametrize("level", (1, 2, 3))
def test_positional_mistakes_are_named_exact_and_rounded(level):
    from exercises.kinds import positional as K

    named = named_mistakes("positional", level, lambda ex, part: K.mistakes_of(ex.given, part))
    assert {"positional_sin_cos_swapped", "positional_from_one", "positional_multiplied"} <= named
    if level > 1:
        assert {"positional_one_frequency", "positional_not_permuted", "positional_with_positions", "no_scaling"} <= named
    if level == 3:
        assert "positional_inverse_permutation" in named
