"""Issue 14 (speed): gqa and multi_head make the same decisions faster. Their checks read every head's
mistakes at once with numpy (exercises/kinds/_shared/heads.py: the stacked mistakes, and the tables of
one head's checks built on them) instead of asking the pipeline head by head. Each fast path is held
here to the slow one it replaces, over many drafts (the rejected ones too): the same mistakes (to the
bit), the same decision, the same operation count. (The pins, tests/test_pins.py, hold the exercises
themselves; the constructive draws are held in tests/test_kinds_<kind>_constructive.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import exercises.kinds.gqa as G
import exercises.kinds.multi_head as M
from exercises.core import engine, misconceptions, numbers, pipeline
from exercises.core.numbers import choice, nonzero_matrix

LEVELS = (1, 2, 3)
GQA_BATCH = 64  # the batch gqa drew its candidates in before its constructive draw (VERSION 2)


def _pooled(rng, shape, count):
    return numbers.pooled_matrices(rng, count, shape, (-1, 0, 1), rows=False)


# ---------------------------------------------------------------- gqa


def _gqa_group_by_batch(rng, size, X, others):
    """gqa's _draw_group before the tables: the checks made on the batch itself."""
    W_K, W_V = _pooled(rng, (2, size.d_k), GQA_BATCH), _pooled(rng, (2, size.d_v), GQA_BATCH)
    K, V = X @ W_K, X @ W_V
    ok = (np.ptp(K.reshape(GQA_BATCH, -1), axis=1) > 0) & np.any(V != 0, axis=2).all(axis=1) \
        & (np.ptp(V, axis=1).max(axis=1) > 0) & G._columns_differ(K) & G._columns_differ(V)
    for K_o, V_o in others:
        ok &= (np.abs(K - K_o).max(axis=(1, 2)) > 0) & (np.abs(V - V_o).max(axis=(1, 2)) > 0)
        ok &= (np.abs(K + K_o).max(axis=(1, 2)) > 0) & (np.abs(V + V_o).max(axis=(1, 2)) > 0)
    good = np.flatnonzero(ok)
    return None if not len(good) else (W_K[good[0]], W_V[good[0]])


def _gqa_head_by_batch(rng, size, X, K, taken):
    n = X.shape[0]
    W_Q = _pooled(rng, (2, size.d_k), GQA_BATCH)
    Q = X @ W_Q
    S = Q @ K.T
    ok = (np.abs(S).max(axis=(1, 2)) <= G.MAX_SCORE) & (np.abs(S - np.swapaxes(S, 1, 2)).max(axis=(1, 2)) > 0) \
        & (np.ptp(S[:, -1, :], axis=1) > 0) & G._columns_differ(Q)
    ok &= (S[:, ~np.tril(np.ones((n, n), dtype=bool))] != 0).any(axis=1)
    for Q_o in taken:
        ok &= np.abs(Q - Q_o).max(axis=(1, 2)) > 0
    good = np.flatnonzero(ok)
    return None if not len(good) else W_Q[good[0]]


def _gqa_draw_by_batch(rng, size):
    """gqa's draw of VERSION 1 (before its tables per X): each piece the first of a checked batch."""
    X = nonzero_matrix(rng, (size.n, 2), size.x_values)
    groups = []
    for _ in range(size.g):
        drawn = _gqa_group_by_batch(rng, size, X, [(X @ k, X @ v) for k, v in groups])
        if drawn is None:
            return None
        groups.append(drawn)
    heads = []
    for i in range(1, size.h + 1):
        j = G.group(i, size.h, size.g)
        same = [X @ w for k, w in enumerate(heads, start=1) if G.group(k, size.h, size.g) == j]
        w_q = _gqa_head_by_batch(rng, size, X, X @ groups[j - 1][0], same)
        if w_q is None:
            return None
        heads.append(w_q)
    given = {"X": X, **{f"W_Q{i}": w for i, w in enumerate(heads, start=1)}}
    given.update({f"W_K{j}": k for j, (k, _) in enumerate(groups, start=1)})
    given.update({f"W_V{j}": v for j, (_, v) in enumerate(groups, start=1)})
    given.update(groups=size.g, d_k=size.d_k, causal=G.CAUSAL)
    return given


def _same_given(a, b) -> bool:
    if (a is None) != (b is None):
        return False
    return a is None or (a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a))


def _gqa_candidates(level: int, seeds: range, tries: int = 12):
    """Drafts as gqa VERSION 1 drew them for these seeds (each piece the first of a checked batch), most
    of them rejected by its checks (gqa's constructive draw, VERSION 2, is held to the same checks in
    tests/test_kinds_gqa_constructive.py)."""
    for seed in seeds:
        rng = engine.rng_for(G.ID, seed, level)
        for _ in range(tries):
            given = _gqa_draw_by_batch(rng, G.SIZES[level])
            if given is not None:
                yield given


@pytest.mark.parametrize("level", LEVELS)
def test_gqa_fast_checks_decide_as_the_pipeline_checks(level):
    decisions = set()
    for given in _gqa_candidates(level, range(15)):
        parts = G._parts(given, level)
        fw = G._Forward(given)
        references = G.references_of(given)
        for i in range(1, fw.h + 1):  # the stacked forward pass gives the references' floats
            assert np.array_equal(fw.O[i - 1], references[f"O{i}"])
        slow = G._apart(given, parts)
        assert G._apart_fast(given, level, fw) == slow
        assert G._operations_fast(given, parts, fw) == G._operations(given, parts)
        decisions.add(slow)
    assert decisions == {True, False}  # both kinds of draft were met


@pytest.mark.parametrize("level", LEVELS)
def test_gqa_stacked_mistakes_are_the_pipelines_to_the_bit(level):
    for given in _gqa_candidates(level, range(8), tries=4):
        ids, alts = G._head_alternatives(given)
        careful = G._careful(given)
        h, _ = G.sizes_of(given)
        for i in range(1, h + 1):
            slow = G.head_mistakes(given, i)
            for k, mid in enumerate(ids):
                fast = alts[i - 1, k]
                if mid not in slow:
                    assert np.isnan(fast).all(), mid
                    continue
                want = misconceptions._comparable(slow[mid]).reshape(-1)
                assert np.array_equal(fast, want, equal_nan=True), mid
            assert not set(slow) - set(ids)
            rounded = pipeline.run(G.head_given(given, i), until={"O"}, rounding=2)["O"]
            assert np.array_equal(careful[i - 1], rounded)


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
