"""mla: one cached latent C = X W_DKV, each head's K and V up-projected from it.

attention_core.latent against multi-head attention whose key and value weights are the products
W_DKV W_UK_i and W_DKV W_UV_i (the up-projected K and V) over many random shapes and seeds, and the
absorbed query's scores against Q Kᵀ; the exercises' references against the same; every mistake named,
exact and rounded; careful students right; sizes, cache sizes and minutes per level."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core import latent, multi_head_attention
from exercises.core import pipeline
from exercises.core.numbers import round_half_up
from exercises.kinds import mla as K
from tests.kinds.common import (
    assert_within_minutes_and_no_runaway,
    careful_and_selftest_answers_grade_as_such,
    named_mistakes,
)

SEEDS = range(15)


def _weights(given: dict, h: int) -> tuple[list, list, list]:
    W_DKV = given["W_DKV"]
    return ([given[f"W_Q{i}"] for i in range(1, h + 1)], [W_DKV @ given[f"W_UK{i}"] for i in range(1, h + 1)],
            [W_DKV @ given[f"W_UV{i}"] for i in range(1, h + 1)])


@pytest.mark.parametrize("seed", range(40))
def test_latent_attention_is_multi_head_attention_with_the_up_projected_keys_and_values(seed):
    rng = np.random.default_rng(seed)
    n, d, d_c, d_k, h = (int(x) for x in rng.integers(1, 5, size=5))
    X, W_DKV = rng.normal(size=(n, d)), rng.normal(size=(d, d_c))
    W_Q, W_UK, W_UV = ([rng.normal(size=shape) for _ in range(h)] for shape in ((d, d_k), (d_c, d_k), (d_c, d_k)))
    causal = bool(seed % 2)
    C, heads = latent.latent_attention(X, W_DKV, W_Q, W_UK, W_UV, causal=causal)
    mha = multi_head_attention(X, W_Q, [W_DKV @ w for w in W_UK], [W_DKV @ w for w in W_UV], causal=causal)
    for i, (mine, theirs) in enumerate(zip(heads, mha.heads)):
        np.testing.assert_allclose(mine.O, theirs.O, atol=1e-10, err_msg=f"seed {seed} head {i + 1}")
        absorbed = X @ latent.absorbed_query(W_Q[i], W_UK[i]) @ C.T  # (X W_QK) Cᵀ
        np.testing.assert_allclose(absorbed, theirs.scores, atol=1e-10, err_msg=f"seed {seed} head {i + 1}")
    assert latent.cache_floats(d_c) == d_c and latent.multi_head_cache_floats(h, d_k, d_k) == 2 * h * d_k


@pytest.mark.parametrize("level", K.LEVELS)
def test_references_sizes_and_minutes(level):
    size = K.SIZES[level]
    for seed in SEEDS:
        ex = exercises.generate(K.ID, seed, level)
        g, case = ex.given, f"mla level {level} seed {seed}"
        assert ex.part_names == K.part_names(size) and g["X"].shape == (size.n, size.d), case
        W_Q, W_K, W_V = _weights(g, size.h)
        mha = multi_head_attention(g["X"], W_Q, W_K, W_V, causal=True)
        np.testing.assert_allclose(ex.part("C").reference, g["X"] @ g["W_DKV"], err_msg=case)
        for i, head in enumerate(mha.heads, start=1):
            expected = {f"K{i}": head.K, f"V{i}": head.V, f"O{i}": head.O, f"scores{i}": head.scores,
                        f"W_QK{i}": g[f"W_Q{i}"] @ g[f"W_UK{i}"].T}
            for name, value in expected.items():
                if name in ex.part_names:
                    np.testing.assert_allclose(ex.part(name).reference, value, atol=1e-12, err_msg=f"{case} {name}")
        floats = int(ex.part("cache_floats").reference[0, 0])
        assert floats == size.d_c < 2 * size.h * size.d_k, case
    assert_within_minutes_and_no_runaway(K.ID, level)


def careful(ex, places: int | None) -> dict[str, np.ndarray]:
    """A student who rounds what they write: C, then each head from their C through the records."""
    C = round_half_up(ex.given["X"] @ ex.given["W_DKV"], places)
    answer = {"C": C, "cache_floats": ex.part("cache_floats").reference}
    for i in range(1, K.SIZES[ex.level].h + 1):
        given = K.head_given(ex.given, i, C)
        if K.SIZES[ex.level].absorbed:
            answer[f"W_QK{i}"] = given["W_Q"] @ given["W_K"].T
            given["scores"] = round_half_up(ex.given["X"] @ answer[f"W_QK{i}"] @ C.T, places)
        run = pipeline.run(given, rounding=places)
        answer.update({f"{name}{i}": run[name] for name in ("K", "V", "scores", "O") if name in run})
    return {name: answer[name] for name in ex.part_names}


@pytest.mark.parametrize("level", K.LEVELS)
def test_mistakes_are_named_and_careful_students_right(level):
    named = named_mistakes(K.ID, level, lambda ex, part: K.mistakes_of(ex).get(part, {}), range(8))
    assert {"mla_cache_kv", "mla_cache_per_head", "mla_up_swapped"} <= named, (level, sorted(named))
    if K.SIZES[level].attention:
        assert {"transposed_scores", "softmax_columns", "no_mask"} <= named, (level, sorted(named))
    careful_and_selftest_answers_grade_as_such(K.ID, level, careful, range(8))


@pytest.mark.parametrize("level", K.LEVELS)
def test_the_count_is_what_the_solution_writes(level):
    """C once; per head K_i (level 3: W_QK_i, X W_QK_i and the scores from C, never Q_i nor K_i) and V_i; where
    attention is asked Q_i, the scores, S/√d_k, A with each worked row's sum, and O_i: counted by hand here."""
    from exercises.core import engine
    from exercises.core.budget import NONE, parts_written, product_operations, written
    from exercises.core.operations import product_unless_identity, softmax_operations

    def up(left, right):  # an up-projection by [[1]] (d_c = d_k = 1) is read off
        return product_unless_identity(left, right) or NONE

    size = K.SIZES[level]
    for seed in range(5):
        ex = exercises.generate(K.ID, seed, level)
        g, case = ex.given, f"mla level {level} seed {seed}"
        C = g["X"] @ g["W_DKV"]
        ops, cells = product_operations(g["X"], g["W_DKV"]), parts_written(ex)  # each cell by its digits
        for i in range(1, size.h + 1):
            W_Q, W_UK, W_UV = g[f"W_Q{i}"], g[f"W_UK{i}"], g[f"W_UV{i}"]
            ops += up(C, W_UV)
            if size.absorbed:
                W_QK = W_Q @ W_UK.T
                ops += product_operations(W_Q, W_UK.T) + product_operations(g["X"], W_QK)
                ops += product_operations(g["X"] @ W_QK, C.T)
                cells += written(g["X"] @ W_QK)
            else:
                ops += up(C, W_UK)
                if size.attention:
                    ops += product_operations(g["X"], W_Q) + product_operations(g["X"] @ W_Q, (C @ W_UK).T)
                    scores = (g["X"] @ W_Q) @ (C @ W_UK).T
                    cells += written(g["X"] @ W_Q) + written(scores)  # Q_i and the scores on the way
            if size.attention:
                S = (g["X"] @ W_Q) @ (C @ W_UK).T / np.sqrt(size.d_k)
                masked = np.where(np.tril(np.ones((size.n, size.n), dtype=bool)), S, -np.inf)
                ops += softmax_operations(masked) + product_operations(np.exp(masked) / np.exp(masked).sum(1, keepdims=True),
                                                                         C @ W_UV)
                if size.d_k > 1:
                    ops += _scale_operations(S, size.d_k)
                    cells += written(S)
                cells += written(np.exp(masked) / np.exp(masked).sum(1, keepdims=True))  # A
        assert engine.operations(ex) == ops + cells, case


def _scale_operations(S, d_k):
    """S (already divided) from the scores: a division per nonzero cell, digits(√d_k)·digits(S) − 1 more each."""
    from exercises.core.budget import Operations, digits
    lookups = 0 if int(np.sqrt(d_k)) ** 2 == d_k else 1
    more = np.maximum(digits(np.sqrt(d_k)) * digits(S) - 1, 0)
    return Operations(divisions=int((np.abs(S) > 1e-12).sum()), lookups=lookups, division_digits=int(more.sum()))
