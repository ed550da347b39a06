"""multi_head's constructive generator (VERSION 5, issue 14): per X every admissible head is enumerated
at once (_admissible) and the heads are drawn among them, a head whose own mistakes clash drawn again
(_clashing). The table is the batch check of VERSION 4 over every head, the head-by-head clash check
decides as the whole-exercise one, every exercise keeps the old guarantees, an exercise stored at VERSION
4 still shows and grades, and variety holds."""

from __future__ import annotations

import json

import numpy as np
import pytest

import exercises
from exercises.core import engine, misconceptions
from exercises.core.numbers import nonzero_matrix
from exercises.kinds import multi_head as K
from tests.stored_exercise import still_shows_and_grades

# exercises.generate("multi_head", 11, level).to_dict() for levels 1-3, by the code at VERSION 4 (main 050cdd7)
STORED = json.loads(
    "{\"1\": {\"kind\": \"multi_head\", \"seed\": 11, \"level\": 1, \"version\": 4, \"given\": {\"X\": [[1.0, 1.0"
    "], [0.0, 1.0]], \"W_Q1\": [[-1.0], [1.0]], \"W_K1\": [[-1.0], [0.0]], \"W_V1\": [[-1.0], [-1.0]], \"W_Q2\": "
    "[[-1.0], [0.0]], \"W_K2\": [[1.0], [-1.0]], \"W_V2\": [[1.0], [1.0]], \"d_k\": 1, \"causal\": false}, \"part"
    "s\": [{\"name\": \"O1\", \"shape\": [2, 1], \"decimals\": 2, \"reference\": [[-1.5], [-1.2689414213699952]]}"
    ", {\"name\": \"O2\", \"shape\": [2, 1], \"decimals\": 2, \"reference\": [[1.2689414213699952], [1.5]]}, {\"n"
    "ame\": \"concat\", \"shape\": [2, 2], \"decimals\": 2, \"reference\": [[-1.5, 1.2689414213699952], [-1.26894"
    "14213699952, 1.5]]}], \"params\": {\"n\": 2, \"h\": 2, \"d_k\": 1, \"d_v\": 1, \"width\": 2}}, \"2\": {\"kin"
    "d\": \"multi_head\", \"seed\": 11, \"level\": 2, \"version\": 4, \"given\": {\"X\": [[-1.0, 0.0], [2.0, 0.0]"
    ", [0.0, 1.0]], \"W_Q1\": [[0.0, 0.0], [1.0, -1.0]], \"W_K1\": [[-1.0, 0.0], [1.0, 1.0]], \"W_V1\": [[1.0], ["
    "1.0]], \"W_Q2\": [[1.0, 0.0], [1.0, 1.0]], \"W_K2\": [[0.0, -1.0], [1.0, -1.0]], \"W_V2\": [[-1.0], [1.0]], "
    "\"d_k\": 2, \"causal\": false}, \"parts\": [{\"name\": \"O1\", \"shape\": [3, 1], \"decimals\": 2, \"referen"
    "ce\": [[0.6666666666666666], [0.6666666666666666], [-0.1656506049739927]]}, {\"name\": \"O2\", \"shape\": [3"
    ", 1], \"decimals\": 2, \"reference\": [[-0.20333627803935772], [0.5092626975639655], [0.7770411066519416]]},"
    " {\"name\": \"concat\", \"shape\": [3, 2], \"decimals\": 2, \"reference\": [[0.6666666666666666, -0.20333627"
    "803935772], [0.6666666666666666, 0.5092626975639655], [-0.1656506049739927, 0.7770411066519416]]}], \"params"
    "\": {\"n\": 3, \"h\": 2, \"d_k\": 2, \"d_v\": 1, \"width\": 2}}, \"3\": {\"kind\": \"multi_head\", \"seed\":"
    " 11, \"level\": 3, \"version\": 4, \"given\": {\"X\": [[2.0, 1.0], [-1.0, 0.0], [2.0, -1.0]], \"W_Q1\": [[0."
    "0, -1.0], [1.0, 1.0]], \"W_K1\": [[0.0, 0.0], [-1.0, -1.0]], \"W_V1\": [[-1.0, 0.0], [1.0, -1.0]], \"W_Q2\":"
    " [[0.0, 0.0], [1.0, -1.0]], \"W_K2\": [[1.0, -1.0], [-1.0, -1.0]], \"W_V2\": [[0.0, -1.0], [1.0, -1.0]], \"W"
    "_O\": [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [-1.0, 0.0]], \"d_k\": 2, \"causal\": false}, \"parts\": [{\"nam"
    "e\": \"O1\", \"shape\": [3, 2], \"decimals\": 2, \"reference\": [[-1.0, 0.0], [-1.5839598709482037, 0.435946"
    "1001719839], [-0.8953278801458558, -0.9378008915439427]]}, {\"name\": \"O2\", \"shape\": [3, 2], \"decimals"
    "\": 2, \"reference\": [[0.0, -1.9785993651041078], [0.0, -1.0], [0.0, 0.9161910256769188]]}, {\"name\": \"con"
    "cat\", \"shape\": [3, 4], \"decimals\": 2, \"reference\": [[-1.0, 0.0, 0.0, -1.9785993651041078], [-1.583959"
    "8709482037, 0.4359461001719839, 0.0, -1.0], [-0.8953278801458558, -0.9378008915439427, 0.0, 0.91619102567691"
    "88]]}, {\"name\": \"out\", \"shape\": [3, 2], \"decimals\": 2, \"reference\": [[0.9785993651041078, 0.0], [-"
    "0.5839598709482037, 0.4359461001719839], [-1.8115189058227745, -0.9378008915439427]]}], \"params\": {\"n\": "
    "3, \"h\": 2, \"d_k\": 2, \"d_v\": 2, \"width\": 4}}}"
)


@pytest.mark.parametrize("level", sorted(STORED))
def test_an_exercise_stored_at_version_4_still_shows_and_grades(level):
    ex = exercises.Exercise.from_dict(STORED[level])
    assert ex.version == 4 < K.VERSION
    tr = K._trace(ex.given, K.head_count(ex))
    for i, hd in enumerate(tr.heads, start=1):
        np.testing.assert_allclose(ex.part(f"O{i}").reference, hd.O)
    still_shows_and_grades(ex)


def _all_heads(d_k, d_v):
    pool_qk, pool_v = K._pool((2, d_k)), K._pool((2, d_v))
    q, k, v = (a.reshape(-1) for a in np.indices((len(pool_qk), len(pool_qk), len(pool_v))))
    return pool_qk, pool_v, q, k, v


def _flat(table, values_per_row):
    pairs, ends, values = table
    counts = np.diff(np.concatenate(([0], ends)))
    if not len(pairs):
        return np.zeros(0, dtype=int)
    return np.sort(np.concatenate([p * values_per_row + values[:c] for p, c in zip(pairs, counts)]))


@pytest.mark.parametrize("level", K.LEVELS)
def test_the_table_holds_what_the_batch_check_keeps_of_every_head(level):
    """_admissible is VERSION 4's batch check (_checked: the checks and budget.head_seconds) over all
    P·P·P_V heads, for X's, masks and budget shares that keep none, some and all; _heads_of reads them."""
    n, _, d_k, d_v, x_values, _ = K.SIZES[level]
    pool_qk, pool_v, q, k, v = _all_heads(d_k, d_v)
    rng = np.random.default_rng(level)
    kept = set()
    for t in range(4 if level == 3 else 8):
        X = nonzero_matrix(rng, (n, 2), x_values).astype(float)
        causal = bool(t % 2)
        for seconds in (150.0, 250.0, 330.0, 1e9):
            table = K._admissible(X.tobytes(), X.shape, d_k, d_v, causal, seconds)
            good = K._checked(X, pool_qk[q], pool_qk[k], pool_v[v], causal, seconds)
            flat = _flat(table, len(pool_v))
            np.testing.assert_array_equal(flat, good)
            kept.add(min(len(good), 1))
            if len(good):
                heads = K._heads_of(table, np.arange(len(good)), d_k, d_v)
                rows = sorted(int(np.flatnonzero((pool_qk == h["W_Q"]).all(axis=(1, 2)))[0] * len(pool_qk)
                                  + np.flatnonzero((pool_qk == h["W_K"]).all(axis=(1, 2)))[0]) * len(pool_v)
                              + int(np.flatnonzero((pool_v == h["W_V"]).all(axis=(1, 2)))[0]) for h in heads)
                assert rows == list(good)
    assert kept == {0, 1}


def test_the_tabled_heads_are_the_admissible_ones_whose_mistakes_are_apart():
    n, _, d_k, d_v, x_values, _ = K.SIZES[1]
    rng = np.random.default_rng(7)
    for t in range(6):
        X = nonzero_matrix(rng, (n, 2), x_values).astype(float)
        causal = bool(t % 2)
        key = (X.tobytes(), X.shape, d_k, d_v, causal, 130.0)
        table = K._admissible(*key)
        every = _flat(table, len(K._pool((2, d_v))))
        apart = K._apart_heads(*key)
        assert set(apart) <= set(every)
        for flat in every[:40]:
            (head,) = K._heads_at(np.array([flat]), d_k, d_v)
            given = {"X": X, "W_Q": head["W_Q"], "W_K": head["W_K"], "W_V": head["W_V"], "d_k": d_k, "causal": causal}
            out = K._trace({"X": X, "W_Q1": head["W_Q"], "W_K1": head["W_K"], "W_V1": head["W_V"], "d_k": d_k,
                           "causal": causal}, 1).heads[0].O
            clashes = bool(misconceptions.clashes(out, K._head_mistakes(given, K.GUARDS)))
            assert (flat in set(apart)) == (not clashes)


@pytest.mark.parametrize("level", K.LEVELS)
def test_head_by_head_clashes_decide_as_the_whole_check(level):
    """_clashing (per head) names a head exactly when the pipeline's clashes does, so any() of it is
    _mistakes_clash: over candidates that clash and that do not."""
    seen = set()
    for h, given in _candidates(level, range(12)):
        heads = K._stacked(given, h)
        outputs = [np.asarray(o) for o in heads.O]
        per_head = K._clashing(heads)
        for i in range(1, h + 1):
            slow = bool(misconceptions.clashes(outputs[i - 1], K._head_mistakes(K.head_given(given, i), K.GUARDS)))
            assert per_head[i - 1] == slow
            seen.add(slow)
        assert bool(per_head.any()) == K._mistakes_clash(given, heads, outputs)
    assert seen == {True, False}


def _candidates(level, seeds):
    n, heads, d_k, d_v, x_values, projected = K.SIZES[level]
    for seed in seeds:
        rng = np.random.default_rng(seed)
        X = nonzero_matrix(rng, (n, 2), x_values)
        table = K._admissible(np.asarray(X, dtype=float).tobytes(), X.shape, d_k, d_v, bool(seed % 2), 1e9)
        if not len(table[0]):
            continue
        drawn = K._heads_of(table, rng.integers(table[1][-1], size=2), d_k, d_v)
        given = {"X": X}
        for i, w in enumerate(drawn, start=1):
            given.update(zip(K.head_names(i), (w["W_Q"], w["W_K"], w["W_V"])))
        given.update(d_k=d_k, causal=bool(seed % 2))
        yield 2, given


@pytest.mark.parametrize("level", K.LEVELS)
def test_every_exercise_keeps_the_guarantees_of_the_redraw(level):
    """What the draw decides from tables holds on the exercises, checked the slow way: every head's
    mistakes apart (the pipeline), heads that differ, the level's budget, no collision."""
    for seed in range(40):
        ex = exercises.generate(K.ID, seed, level)
        h = K.head_count(ex)
        tr = K._trace(ex.given, h)
        outputs = [hd.O for hd in tr.heads]
        assert K._differ([hd.A for hd in tr.heads]) and K._differ(outputs), (level, seed)
        assert not any(misconceptions.clashes(outputs[i - 1], K._head_mistakes(K.head_given(ex.given, i), K.GUARDS))
                       for i in range(1, h + 1)), (level, seed)
        assert engine.within_budget(ex), (level, seed)
        assert not misconceptions.collides(ex, K.GUARDS), (level, seed)
        assert (ex.given["d_k"] == 2) == (level >= 2)


def _given_key(ex):
    return tuple((k, np.asarray(v).tobytes()) for k, v in sorted(ex.given.items()))


@pytest.mark.parametrize("level", K.LEVELS)
def test_variety_does_not_collapse(level):
    """Distinct given values in 200 seeds (VERSION 4: 199, 200, 200; VERSION 5: 197, 200, 200)."""
    seen = {_given_key(exercises.generate(K.ID, seed, level)) for seed in range(200)}
    assert len(seen) >= 180, len(seen)
