"""Issue 14 (speed): multi_head makes the same decisions faster. Its checks read every head's
mistakes at once with numpy (exercises/kinds/_shared/heads.py: the stacked mistakes, and the tables of
one head's checks built on them) instead of asking the pipeline head by head. Each fast path is held
here to the slow one it replaces, over many drafts (the rejected ones too): the same mistakes (to the
bit), the same decision, the same operation count. (The pins, tests/test_pins.py, hold the exercises
themselves; the constructive draws are held in tests/test_kinds_<kind>_constructive.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import exercises.kinds.multi_head as M
from exercises.core import engine, misconceptions, numbers, pipeline
from exercises.core.numbers import choice, nonzero_matrix

LEVELS = (1, 2, 3)


def _pooled(rng, shape, count):
    return numbers.pooled_matrices(rng, count, shape, (-1, 0, 1), rows=False)


def _same_given(a, b) -> bool:
    if (a is None) != (b is None):
        return False
    return a is None or (a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a))


# ---------------------------------------------------------------- multi_head


def _mh_head_by_batch(rng, d_k, d_v, X, causal, seconds):
    """multi_head's _draw_head before the tables: the checks and the hand work counted on the batch."""
    from exercises.core import budget

    n = X.shape[0]
    W_Q, W_K = _pooled(rng, (2, d_k), M.HEAD_BATCH), _pooled(rng, (2, d_k), M.HEAD_BATCH)
    W_V = _pooled(rng, (2, d_v), M.HEAD_BATCH)
    K = X @ W_K
    S = (X @ W_Q) @ np.swapaxes(K, 1, 2)
    V = X @ W_V
    ok = ((np.abs(S).max(axis=(1, 2)) <= M.MAX_SCORE) & (np.ptp(K.reshape(len(K), -1), axis=1) > 0)
          & (np.abs(S - np.swapaxes(S, 1, 2)).max(axis=(1, 2)) > 1e-9))
    ok &= np.any(V != 0, axis=2).all(axis=1) & (np.ptp(V, axis=1).max(axis=1) > 0)
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    ok &= np.any([np.ptp(S[:, i, visible[i]], axis=1) > 0 for i in range(n) if visible[i].sum() > 1], axis=0)
    if causal:
        ok &= (S[:, ~visible] != 0).any(axis=1)
    good = np.flatnonzero(ok)
    if len(good):
        good = good[budget.head_seconds(X, W_Q[good], W_K[good], W_V[good], causal) <= seconds]
    if not len(good):
        return None
    b = good[0]
    return {"W_Q": W_Q[b], "W_K": W_K[b], "W_V": W_V[b]}


@pytest.mark.parametrize("level", LEVELS)
def test_multi_head_draws_what_the_batch_checks_drew(level):
    n, _, d_k, d_v, x_values, _ = M.SIZES[level]
    for seed in range(30):
        fast, slow = np.random.default_rng(seed), np.random.default_rng(seed)
        for causal in (False, True):
            for seconds in (60.0, 100.0, 1e9):  # budgets that keep few, some, all of the candidates
                X = nonzero_matrix(fast, (n, 2), x_values)
                assert np.array_equal(X, nonzero_matrix(slow, (n, 2), x_values))
                assert _same_given(M._draw_head(fast, d_k, d_v, X, causal, seconds),
                                   _mh_head_by_batch(slow, d_k, d_v, X, causal, seconds))
        assert fast.integers(1 << 30) == slow.integers(1 << 30)


def _mh_candidates(level: int, seeds: range):
    """Drafts as multi_head's _draft makes them, before its checks (the heads' budget left out)."""
    n, heads, d_k, d_v, x_values, projected = M.SIZES[level]
    for seed in seeds:
        rng = engine.rng_for(M.ID, seed, level)
        h = choice(rng, heads)
        causal = bool(rng.integers(2))
        for _ in range(6):
            X = nonzero_matrix(rng, (n, 2), x_values)
            drawn = [M._draw_head(rng, d_k, d_v, X, causal, 1e9) for _ in range(h)]
            if any(w is None for w in drawn):
                continue
            given = {"X": X}
            for i, w in enumerate(drawn, start=1):
                given.update(zip(M.head_names(i), (w["W_Q"], w["W_K"], w["W_V"])))
            if projected:
                given["W_O"] = M._weights(rng, (h * d_v, 2))
            given.update(d_k=d_k, causal=causal)
            yield h, given


@pytest.mark.parametrize("level", LEVELS)
def test_multi_head_fast_checks_decide_as_the_pipeline_checks(level):
    decisions = set()
    for h, given in _mh_candidates(level, range(25)):
        tr = M._trace(given, h)
        outputs = [hd.O for hd in tr.heads]
        parts = M._parts(tr, level)
        heads = M._stacked(given, h)
        for i, o in enumerate(outputs):
            assert np.array_equal(heads.O[i], o)
        slow = any(misconceptions.clashes(outputs[i - 1], M._head_mistakes(M.head_given(given, i), M.GUARDS))
                   for i in range(1, h + 1))
        assert M._mistakes_clash(given, heads, outputs) == slow
        assert M._operations_fast(given, parts, heads) == M._operations(given, parts)
        decisions.add(slow)
    assert decisions == {True, False}


@pytest.mark.parametrize("level", LEVELS)
def test_multi_head_stacked_mistakes_are_the_pipelines_to_the_bit(level):
    for h, given in _mh_candidates(level, range(6)):
        heads = M._stacked(given, h)
        ids, O = heads.mistakes()
        assert set(ids) <= set(M.GUARDS)
        for i in range(1, h + 1):
            slow = M._head_mistakes(M.head_given(given, i), M.GUARDS)
            assert set(slow) == set(ids)
            for k, mid in enumerate(ids):
                assert np.array_equal(O[k, i - 1], slow[mid], equal_nan=True), mid


def test_stacked_mistakes_of_any_heads_are_the_pipelines_to_the_bit():
    """Heads (its forward pass and every mistake, written into one stack) over heads no kind draws: 1 to 4
    tokens, d_k 1, 2 or 4, halves among the scores, d_model that makes scaled_by_sqrt_d_model a mistake of
    its own or not, causal or not; X = I, so each head's Q, K and V are its weights (exact products)."""
    rng = np.random.default_rng(14)
    met = set()
    for _ in range(160):
        h, n, d_k, d_v = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.choice([1, 2, 4])), int(rng.integers(1, 3))
        causal = bool(rng.integers(2))
        Q, K = (rng.integers(-2, 3, (h, n, d_k)) / rng.choice([1.0, 2.0]) for _ in range(2))
        V = rng.integers(-2, 3, (h, n, d_v)).astype(float)
        heads = M.Heads(Q, K, V, causal, n)
        ids, O = heads.mistakes()
        met.update(ids)
        for i in range(h):
            one = {"X": np.eye(n), "W_Q": Q[i], "W_K": K[i], "W_V": V[i], "d_k": d_k, "causal": causal}
            env = pipeline.run(one, until={"O"})
            assert np.array_equal(heads.O[i], env["O"]) and np.array_equal(heads.A[i], env["A"])
            slow = M._head_mistakes(one, M.GUARDS)
            assert set(slow) == set(ids)
            for k, mid in enumerate(ids):
                assert np.array_equal(O[k, i], slow[mid], equal_nan=True), (mid, n, d_k, causal)
    assert met == set(M.GUARDS)


# ---------------------------------------------------------------- grad_multi_head


@pytest.mark.parametrize("level", LEVELS)
def test_grad_multi_head_fast_check_decides_as_all_apart(level):
    import exercises.kinds.grad_multi_head as GM
    from exercises.kinds._shared.hand import all_apart

    decisions = set()
    for seed in range(40):
        rng = engine.rng_for(GM.ID, seed, level)
        for _ in range(4):
            draft = GM._draft(rng, level)
            g = draft.given
            slow = all_apart(draft.parts, lambda p, g=g: GM.mistakes_of(g, p.name))
            assert GM._apart(g, draft.parts) == slow
            for p in draft.parts:
                fast, plain = GM.mistakes_of(g, p.name, p.shape, GM._heads_of(g)), GM.mistakes_of(g, p.name)
                assert fast.keys() == plain.keys() and all(np.array_equal(fast[k], plain[k]) for k in fast)
            decisions.add(slow)
    assert decisions == {True, False}


@pytest.mark.parametrize("level", LEVELS)
def test_multi_head_seconds_from_the_table_are_budgets(level):
    """The hand work read from the table of its pieces is budget.head_seconds, candidate by candidate."""
    from exercises.core import budget

    n, _, d_k, d_v, x_values, _ = M.SIZES[level]
    rng = np.random.default_rng(level)
    pool_qk, pool_v = M._pool((2, d_k)), M._pool((2, d_v))
    for _ in range(20):
        X = nonzero_matrix(rng, (n, 2), x_values)
        causal = bool(rng.integers(2))
        rows_q, rows_k = rng.integers(len(pool_qk), size=64), rng.integers(len(pool_qk), size=64)
        rows_v = rng.integers(len(pool_v), size=64)
        table = M._seconds_table(X.tobytes(), X.shape, d_k, d_v, causal)
        assert np.array_equal(M._head_seconds(table, rows_q, rows_k, rows_v),
                              budget.head_seconds(X, pool_qk[rows_q], pool_qk[rows_k], pool_v[rows_v], causal))
