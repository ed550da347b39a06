"""multi_head's fast paths of the second speed pass (issue 14) hold to the code they replace, so the
exercises stay the same (the pins hold them too): _admitted's table and seconds are _admissible's before
(kept here word for word), the budget read from them (_seconds_fast) is _operations', _differ_fast is
_differ (np.allclose), _all_zero is np.allclose(·, 0), the heads drawn as pool rows (_rows_of, _rows_at)
are _heads_of's, and _apart_heads keeps the heads the dict-built stack of every admissible head kept."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from exercises.core import budget, engine
from exercises.core.numbers import nonzero_matrix
from exercises.kinds import multi_head as K


def _admissible_before(x: bytes, x_shape: tuple[int, int], d_k: int, d_v: int, causal: bool, seconds: float) -> tuple:
    """multi_head._admissible before this pass (int8), word for word, its pair and W_V seconds returned too."""
    X = np.frombuffer(x).reshape(x_shape)
    n = x_shape[0]
    add, mul, div = budget.RATES["additions"], budget.RATES["multiply_adds"], budget.RATES["divisions"]
    pool_qk, pool_v = K._pool((K.D_MODEL, d_k)), K._pool((K.D_MODEL, d_v))
    P = len(pool_qk)
    QK = X @ pool_qk  # (P, n, d_k): every row's queries (and keys)
    V = X @ pool_v  # (P_V, n, d_v)
    products, of_pair = K._score_forms(d_k)  # S = X (W_Q W_Kᵀ) Xᵀ: per distinct W_Q W_Kᵀ only
    S = (X @ products) @ X.T  # (U, n, n), whole numbers
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    seen = visible.sum(axis=1)
    rows = seen > 1
    U = len(S)
    flat = S.reshape(U, n * n)
    # a query seeing two keys that score differently: a visible score unlike its row's first (key 1 is seen)
    unlike = ((S != S[:, :, :1]) & (visible & rows[:, None])).reshape(U, -1).any(axis=1)
    ok = (np.abs(flat) <= K.MAX_SCORE).all(axis=1) & (S != np.swapaxes(S, 1, 2)).reshape(U, -1).any(axis=1) & unlike
    nz = flat != 0
    if causal:
        ok &= (nz & ~visible.reshape(-1)).any(axis=1)
    forms = budget.RATES["exponentials"] * (nz & (visible & rows[:, None]).reshape(-1)).sum(axis=1)
    if d_k != 1:
        forms = forms + div * nz.sum(axis=1)
    ok, forms = ok[of_pair], forms[of_pair]  # (P_q, P_k)
    ok &= (np.ptp(QK.reshape(P, -1), axis=1) > 0)[None, :]  # the keys differ

    def costs(nonzero, hard):  # seconds of products with `nonzero` terms, `hard` of them not ±1
        return mul * hard + add * (nonzero - hard)

    xz = (X != 0).astype(float)
    xh = xz * (np.abs(X) != 1)

    def projection(pool):  # (rows,) seconds of X @ pool[r]
        wz = (pool != 0).astype(float)
        wh = wz * (np.abs(pool) != 1)
        return costs((xz @ wz).sum(axis=(1, 2)), (xh @ wh).sum(axis=(1, 2)))

    qz = (QK != 0).astype(float)  # (P, n, d_k)
    qh = qz * (np.abs(QK) != 1)
    tz, th = qz.sum(axis=1), qh.sum(axis=1)  # (P, d_k): nonzero entries per column, and those not ±1
    pair = costs(tz @ tz.T, th @ th.T) + forms  # Q Kᵀ (queries' row q, keys' row k), √d_k, exponentials
    own = projection(pool_qk)
    pair = pair + own[:, None] + own[None, :] + float(add * (seen[rows] - 1).sum() + div * seen[rows].sum())
    # A V key by key: the queries seeing key j (weights nonzero), those not 1 (rows with two or more keys)
    weights = visible.sum(axis=0).astype(float)  # (n,)
    soft = (visible & rows[:, None]).sum(axis=0).astype(float)
    vz = (V != 0).astype(float)
    vh = vz * (np.abs(V) != 1)
    value = projection(pool_v) + costs(vz.sum(axis=2) @ weights, vh.sum(axis=2) @ soft)  # (P_V,)
    value_ok = np.any(V != 0, axis=2).all(axis=1) & (np.ptp(V, axis=1).max(axis=1) > 0)
    pairs = np.flatnonzero(ok)  # q·P + k
    values = np.flatnonzero(value_ok)
    values = values[np.argsort(value[values], kind="stable")]  # the W_V rows, cheapest first
    fitting = np.searchsorted(value[values], seconds - pair.reshape(-1)[pairs], side="right")  # W_V's per pair
    kept = fitting > 0
    return pairs[kept], np.cumsum(fitting[kept]), values, pair.reshape(-1), value


def _share(level: int, h: int = 2) -> float:
    """_draft's budget share per head."""
    n, _, d_k, d_v, _, projected = K.SIZES[level]
    cells = n * d_v * h * 2 + (n * K.D_MODEL if projected else 0)
    return (budget.BUDGET_MINUTES[level] * 60 - budget.RATES["cells"] * cells) / h


def _every_x(level: int):
    """Every X of the level's space (no zero row or column), as nonzero_matrix may draw it."""
    n, _, _, _, x_values, _ = K.SIZES[level]
    for cells in itertools.product(x_values, repeat=n * K.D_MODEL):
        X = np.array(cells, dtype=float).reshape(n, K.D_MODEL)
        if (X != 0).any(axis=1).all() and (X != 0).any(axis=0).all():
            yield X


def _same_table(new: tuple, old: tuple, where) -> None:
    """_admitted's answer is _admissible_before's: the same table, and the same seconds unless it told
    early (pair seconds None) that X admits no head."""
    same = [0, 1, 2, 4] if new[3] is None else [0, 1, 2, 3, 4]
    if new[3] is None:
        assert not len(old[0]) and not len(new[0]), where
    for i in same:
        assert np.array_equal(new[i], old[i]), (i, where)


@pytest.mark.parametrize("level", (2, 3))
def test_the_early_bound_refuses_only_xs_that_admit_no_head(level):
    """_admitted's lower bounds (told before the pairs' seconds are made) refuse an X only when the table
    before held no head: over a quarter of the level's X space (every fourth X), both masks, at the
    level's budget share; and they tell most of the X's that admit none (level 2: ~98 %)."""
    n, _, d_k, d_v, _, _ = K.SIZES[level]
    early = empty = 0
    for t, X in enumerate(list(_every_x(level))[::4]):
        causal = bool(t % 2)
        key = (X.tobytes(), X.shape, d_k, d_v, causal, _share(level))
        new, old = K._admitted.__wrapped__(*key), _admissible_before(*key)
        _same_table(new, old, (X, causal))
        empty += not len(old[0])
        early += new[3] is None
    assert early <= empty
    if level == 2:
        assert early >= 0.9 * empty > 0


@pytest.mark.parametrize("level", K.LEVELS)
def test_admitted_is_the_table_before_with_its_seconds(level):
    """Over X's of the level's space (every one at level 1, a spread of the 3 321 at levels 2-3), both
    masks, budget shares that keep none, some and all: the same pairs, ends and W_V rows, the same seconds
    per pair and per W_V row, and X W, X W_V as X @ pool."""
    n, _, d_k, d_v, _, _ = K.SIZES[level]
    xs = list(_every_x(level))
    if level > 1:
        xs = xs[::17]
    kept = set()
    for t, X in enumerate(xs):
        causal = bool(t % 2)
        for seconds in (120.0, _share(level), 1e9):
            key = (X.tobytes(), X.shape, d_k, d_v, causal, seconds)
            new = K._admitted(*key)
            old = _admissible_before(*key)
            _same_table(new, old, (X, causal, seconds))
            assert [np.array_equal(a, b) for a, b in zip(K._admissible(*key), old[:3])] == [True] * 3
            assert np.array_equal(new[5], X @ K._pool((K.D_MODEL, d_k)))
            assert np.array_equal(new[6], X @ K._pool((K.D_MODEL, d_v)))
            kept.add(min(len(new[0]), 1))
    assert kept == {0, 1}


def _tables(level: int, rng: np.random.Generator, count: int, seconds: float = 1e9):
    """(t, X, causal, _admitted's table) for the first `count` X's of the level drawn from rng (causal every
    other one) that admit a head within `seconds`; lazily, so a test's own draws from rng come in between."""
    n, _, d_k, d_v, x_values, _ = K.SIZES[level]
    for t in range(count):
        X = nonzero_matrix(rng, (n, K.D_MODEL), x_values).astype(float)
        causal = bool(t % 2)
        admitted = K._admitted(X.tobytes(), X.shape, d_k, d_v, causal, seconds)
        if len(admitted[0]):
            yield t, X, causal, admitted


@pytest.mark.parametrize("level", K.LEVELS)
def test_heads_drawn_as_rows_are_heads_of_and_stack_alike(level):
    """_rows_of names the pool rows of _heads_of's heads, _rows_at those of flat indices (_heads_at), and
    the Heads built from the table's X W are _stack_heads' to the bit (O, A, the mistakes)."""
    n, _, d_k, d_v, x_values, _ = K.SIZES[level]
    pool_qk, pool_v = K._pool((K.D_MODEL, d_k)), K._pool((K.D_MODEL, d_v))
    rng = np.random.default_rng(40 + level)
    met = 0
    for _t, X, causal, admitted in _tables(level, rng, 30):
        met += 1
        draws = rng.integers(admitted[1][-1], size=3)
        q, k, v = K._rows_of(admitted, draws, len(pool_qk))
        dicts = K._heads_of(admitted[:3], draws, d_k, d_v)
        for i, w in enumerate(dicts):
            assert np.array_equal(pool_qk[q[i]], w["W_Q"]) and np.array_equal(pool_qk[k[i]], w["W_K"])
            assert np.array_equal(pool_v[v[i]], w["W_V"])
        flat = (q * len(pool_qk) + k) * len(pool_v) + v
        for a, b in zip(K._rows_at(flat, len(pool_qk), len(pool_v)), (q, k, v)):
            assert np.array_equal(a, b)
        QK, V = admitted[5], admitted[6]
        fast, slow = K.Heads(QK[q], QK[k], V[v], causal, K.D_MODEL), K._stack_heads(X, dicts, causal)
        for name in ("S", "A", "O"):
            assert np.array_equal(getattr(fast, name), getattr(slow, name), equal_nan=True)
        assert np.array_equal(fast.mistakes()[1], slow.mistakes()[1], equal_nan=True)
        assert np.array_equal(K._clashing(fast), K._clashing(slow))
        every = K._flat_heads(*admitted[:3], len(pool_v))
        assert len(every) == admitted[1][-1]
        assert np.array_equal(K._rows_at(every[draws], len(pool_qk), len(pool_v))[2], v)
    assert met >= 10


def _apart_before(key: tuple) -> np.ndarray:
    """_apart_heads before this pass: every admissible head as a dict, stacked, _clashing."""
    pairs, ends, values = K._admissible(*key)
    if not len(pairs):
        return np.zeros(0, dtype=int)
    X = np.frombuffer(key[0]).reshape(key[1])
    d_k, d_v, causal = key[2], key[3], key[4]
    heads = K._heads_of((pairs, ends, values), np.arange(ends[-1]), d_k, d_v)
    counts = np.diff(np.concatenate(([0], ends)))
    flat = np.concatenate([pairs[i] * len(K._pool((K.D_MODEL, d_v))) + values[:c] for i, c in enumerate(counts)])
    return flat[~K._clashing(K._stack_heads(X, heads, causal))]


def test_apart_heads_keep_what_they_kept_for_every_x_of_level_1():
    n, _, d_k, d_v, _, _ = K.SIZES[1]
    sizes = set()
    for X in _every_x(1):
        for causal in (False, True):
            key = (X.tobytes(), X.shape, d_k, d_v, causal, _share(1))
            apart = K._apart_heads(*key)
            assert np.array_equal(apart, _apart_before(key)), (X, causal)
            sizes.add(min(len(apart), 2))
    assert sizes == {0, 1, 2} or sizes == {0, 2}


def _drafts(level: int, seeds: range):
    """Drafts as _draft builds them, with heads drawn among every admissible head (no budget share), so
    that some are over the level's budget: (admitted, q, k, v, given, parts)."""
    n, heads, d_k, d_v, x_values, projected = K.SIZES[level]
    pool_qk, pool_v = K._pool((K.D_MODEL, d_k)), K._pool((K.D_MODEL, d_v))
    for seed in seeds:
        rng = engine.rng_for(K.ID, seed, level)
        causal = bool(seed % 2)
        X = nonzero_matrix(rng, (n, K.D_MODEL), x_values)
        admitted = K._admitted(np.asarray(X, dtype=float).tobytes(), X.shape, d_k, d_v, causal, 1e9)
        if not len(admitted[0]):
            continue
        h = 2
        q, k, v = K._rows_of(admitted, rng.integers(admitted[1][-1], size=h), len(pool_qk))
        given = {"X": X}
        for i in range(h):
            given.update(zip(K.head_names(i + 1), (pool_qk[q[i]], pool_qk[k[i]], pool_v[v[i]])))
        if projected:
            given["W_O"] = K._weights(rng, (h * d_v, K.D_MODEL))
        given.update(d_k=d_k, causal=causal)
        tr = K._trace(given, h)
        yield admitted, q, k, v, given, K._parts(tr, level)


@pytest.mark.parametrize("level", K.LEVELS)
def test_seconds_from_the_table_are_the_operations(level):
    """_seconds_fast is _operations(given, parts).seconds, over drafts within the level's budget and over
    it (so _draft's budget decision is the same)."""
    within = set()
    for admitted, q, k, v, given, parts in _drafts(level, range(60)):
        seconds = K._seconds_fast(admitted, q, k, v, given, parts)
        assert seconds == K._operations(given, parts).seconds
        within.add(seconds / 60.0 <= budget.BUDGET_MINUTES[level])
    assert within == {True, False}


def test_differ_fast_is_differ_and_all_zero_is_allclose():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(3, 2))
    cases = [[base, base], [base, base + 1e-9], [base, base * (1 + 2e-5)], [base, base * (1 + 0.5e-5)],
             [base, base + 2e-8], [base, base + 0.9e-8], [base, -base], [base, base.copy(), base + 1],
             [base + 1, base, base], [np.zeros((3, 2)), np.full((3, 2), 1e-8)], [np.zeros((3, 2)), np.full((3, 2), 2e-8)],
             [np.full((2, 2), np.inf), np.full((2, 2), np.inf)], [np.full((2, 2), np.nan), np.full((2, 2), np.nan)],
             [base, np.where(base > 0, np.inf, base)]]
    for _ in range(300):
        a = np.round(rng.normal(size=(3, 1)), int(rng.integers(0, 3)))
        cases.append([a, a + rng.choice([0.0, 1e-9, 1e-8, 1e-7, 1e-5]) * rng.normal(size=a.shape)])
    seen = set()
    for matrices in cases:
        assert K._differ_fast(matrices) == K._differ(matrices)
        seen.add(K._differ(matrices))
    assert seen == {True, False}
    for a in [np.zeros(3), np.full(3, 1e-8), np.full(3, -1.01e-8), np.array([0.0, np.inf]), np.array([np.nan]),
              *(rng.choice([0.0, 5e-9, 1e-8, 2e-8], size=(3, 2)) for _ in range(100))]:
        assert K._all_zero(a) == bool(np.allclose(a, 0))


@pytest.mark.parametrize("level", K.LEVELS)
def test_clashing_in_one_list_is_clashing_before(level):
    """_clashing (the output and the mistakes in one list) names the heads _clashing_before named: over
    every admissible head of X's of the level (big stacks, clashing and apart heads, causal or not)."""
    n, _, d_k, d_v, x_values, _ = K.SIZES[level]
    rng = np.random.default_rng(60 + level)
    seen = set()
    for _t, _X, causal, admitted in _tables(level, rng, 12):
        flat = K._flat_heads(*admitted[:3], len(admitted[6]))[:400]
        q, k, v = K._rows_at(flat, len(admitted[5]), len(admitted[6]))
        heads = K.Heads(admitted[5][q], admitted[5][k], admitted[6][v], causal, K.D_MODEL)
        before = K._clashing_before(heads)
        assert np.array_equal(K._clashing(heads), before)
        seen.update(before.tolist())
    assert seen == {True, False}


@pytest.mark.parametrize("level", K.LEVELS)
def test_collides_hook_is_misconceptions_collides(level):
    """The kind's collides answers as misconceptions.collides, on exercises and on one whose parts a
    guarded mistake leads to (a part named O: then it asks misconceptions.collides itself)."""
    from dataclasses import replace

    import exercises
    from exercises.core import misconceptions

    for seed in range(40):
        ex = exercises.generate(K.ID, seed, level)
        assert K.collides(ex, K.GUARDS) == misconceptions.collides(ex, guards=K.GUARDS) is False
    part = ex.part("O1")
    renamed = replace(ex, parts=(replace(part, name="O"), *ex.parts[1:]))
    assert K._asked(tuple(renamed.part_names), K.GUARDS)
    assert K.collides(renamed, K.GUARDS) == misconceptions.collides(renamed, guards=K.GUARDS)


@pytest.mark.parametrize("level", (2, 3))
@pytest.mark.parametrize("h", (2, 3))
def test_heads_drawn_with_the_first_redraw_ahead_are_the_redrawn_ones(level, h, monkeypatch):
    """_apart_draw (the first redraw's heads checked with the first h, the generator's draws made ahead
    and its state put back) draws what _redrawn (a stack of the current h heads per check) drew: the same
    rows, O and A to the bit, the same giving up, and the generator left in the same state; over draws
    that keep the first heads, redraw once, redraw more often and give up."""
    n, _, d_k, d_v, x_values, _ = K.SIZES[level]
    rng = np.random.default_rng(80 + level)
    outcomes = set()
    counted = []
    original = K._clashing

    def counting(heads):
        counted.append(1)
        return original(heads)

    monkeypatch.setattr(K, "_clashing", counting)
    for t, _X, causal, admitted in _tables(level, rng, 400, _share(level)):
        fast, slow = np.random.default_rng([t, level]), np.random.default_rng([t, level])
        a = K._apart_draw(fast, admitted, h, causal)
        counted.clear()
        b = K._redrawn(slow, admitted, h, causal)
        assert (a is None) == (b is None)
        if a is not None:
            for x, y in zip(a[:3], b[:3]):
                assert np.array_equal(x, y)
            assert np.array_equal(a[3].O, b[3].O) and np.array_equal(a[3].A, b[3].A)
            assert not a[3].clashing.any() and not b[3].clashing.any()
        assert fast.integers(1 << 62) == slow.integers(1 << 62)
        outcomes.add("gave up" if b is None else min(len(counted), 3))
    assert {1, 2, 3} <= outcomes


def test_picked_heads_are_a_stack_of_them_alone():
    """_Picked (the heads _apart_draw keeps out of a bigger stack): h, O and A of a stack of them alone."""
    n, _, d_k, d_v, x_values, _ = K.SIZES[2]
    X = np.array([[1.0, 2.0], [-1.0, 0.0], [0.0, 1.0]])
    admitted = K._admitted(X.tobytes(), X.shape, d_k, d_v, True, 1e9)
    q, k, v = K._rows_of(admitted, np.arange(5) * 7, len(admitted[5]))
    QK, V = admitted[5], admitted[6]
    stack, at = K.Heads(QK[q], QK[k], V[v], True, K.D_MODEL), np.array([3, 1])
    alone = K.Heads(QK[q[at]], QK[k[at]], V[v[at]], True, K.D_MODEL)
    picked = K._Picked(stack, at)
    assert picked.h == alone.h == 2 and not picked.clashing.any()
    assert np.array_equal(picked.O, alone.O) and np.array_equal(picked.A, alone.A)


def test_the_stored_no_head_tables_are_remade_bit_for_bit_and_read_at_each_xs_place():
    """multi_head/no_head.py holds, for every X of level 2, causal or not, whether _admitted finds no head
    within a head's share: remade here bit for bit; _draft reads X's bit at _x_index(X), which is what
    _admitted says of that very X; another budget share, or level 3, has no table (every X is costed)."""
    n, heads, d_k, d_v, x_values, _ = K.SIZES[2]
    share = K._share(2, heads[0])
    rng = np.random.default_rng(14)
    for causal in (False, True):
        stored = K._no_head(2, causal, share)
        assert np.array_equal(stored, K.no_head_table(2, causal))
        assert 0.2 < stored.mean() < 0.8
        for _ in range(200):
            X = nonzero_matrix(rng, (n, K.D_MODEL), x_values)
            admitted = K._admitted(X.tobytes(), X.shape, d_k, d_v, causal, share)
            assert stored[K._x_index(X, x_values)] == (not len(admitted[0]))
    assert K._no_head(2, False, share + 1.0) is None and K._no_head(3, False, K._share(3, 2)) is None


def test_level_one_tables_made_at_once_are_each_xs_own():
    """_every_x holds, for every X nonzero_matrix can draw at level 1 (each met in 400 draws is there), the
    very tables _admitted and _apart_heads make for it, causal or not; a level with more tokens has none."""
    n, heads, d_k, d_v, x_values, _ = K.SIZES[1]
    share = K._share(1, heads[0])
    rng = np.random.default_rng(41)
    for causal in (False, True):
        every = K._every_x(1, causal, share)
        assert len(every) == 56
        for _ in range(400):
            X = nonzero_matrix(rng, (n, K.D_MODEL), x_values)
            admitted, apart = every[X.tobytes()]
            key = (X.tobytes(), X.shape, d_k, d_v, causal, share)
            assert np.array_equal(apart, K._apart_heads.__wrapped__(*key))
            assert all(a is b is None or np.array_equal(a, b) for a, b in zip(admitted, K._admitted.__wrapped__(*key)))
    assert K.SIZES[2][0] > K.TABLED_TOKENS
