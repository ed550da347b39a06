"""Issue 14 (speed): gqa makes the same decisions faster. Their checks read every head's
mistakes at once with numpy (exercises/kinds/_shared/heads.py: the stacked mistakes, and the tables of
one head's checks built on them) instead of asking the pipeline head by head. Each fast path is held
here to the slow one it replaces, over many drafts (the rejected ones too): the same mistakes (to the
bit), the same decision, the same operation count. (The pins, tests/test_pins.py, hold the exercises
themselves; the constructive draws are held in tests/test_kinds_<kind>_constructive.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import exercises.kinds.gqa as G
from exercises.core import engine, misconceptions, numbers, pipeline
from exercises.core.numbers import nonzero_matrix

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
