"""The fast paths of the decoder kinds' generators (issue 14: generate + grade ≤ 2 ms) decide as the slow
ones did: the same values, the same yes/no, so the same exercises (tests/test_pins.py holds those)."""

from __future__ import annotations

import math

import numpy as np

from attention_core import softmax
from exercises.core import engine, misconceptions, numbers
from exercises.core.levels import spec
from exercises.core.model import Exercise
from exercises.kinds import kv_cache, rope
from exercises.kinds._shared.fast import all_clash_free, apart_from, clash_free
from exercises.kinds._shared.hand import all_apart

SEEDS = range(60)


def _rope_drafts():
    return [rope._draft(np.random.default_rng(seed), level) for level in rope.LEVELS for seed in SEEDS]


def test_rope_references_without_sympy_are_the_sympy_products_floats():
    for draft in _rope_drafts():
        g = draft.given
        Q_rot, K_rot = rope.exact_rotated(g["Q"], g["pos"], g["theta"]), rope.exact_rotated(g["K"], g["pos"], g["theta"])
        slow = {"Q_rot": rope._floats(Q_rot), "K_rot": rope._floats(K_rot), "scores": rope._floats(Q_rot * K_rot.T)}
        fast = rope.exact_references(g["Q"], g["K"], g["pos"], g["theta"])
        for name, value in slow.items():
            assert fast[name].shape == value.shape and np.array_equal(fast[name], value), name


def test_rope_mistakes_at_once_are_mistakes_of_part_by_part():
    for draft in _rope_drafts():
        g = draft.given
        fast = rope.guarded_mistakes(g)
        for name in rope.PARTS:
            slow = {**rope.mistakes_of(g, name), **rope._plain_score_mistakes(g, name)}
            assert list(fast[name]) == list(slow)
            assert all(np.array_equal(fast[name][mid], slow[mid]) for mid in slow)
        assert all_clash_free(draft.parts, fast) == all_apart(
            draft.parts, lambda p, g=g: {**rope.mistakes_of(g, p.name), **rope._plain_score_mistakes(g, p.name)})


def _cases(rng: np.random.Generator):
    """References and mistakes that are near, equal, −∞ in places, NaN, or of other shapes."""
    for _ in range(1000):
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)))
        ref = rng.choice([-1.0, 0.0, 0.5, 1.0], size=shape)
        if rng.random() < 0.2:
            ref[0, 0] = -np.inf
        alts = {}
        for k in range(int(rng.integers(0, 6))):
            kind = rng.integers(5)
            if kind == 0:
                alt = ref + rng.choice([0.0, 0.004, misconceptions.GAP, 0.02], size=shape)  # on the gap too
            elif kind == 1:
                alt = rng.choice([-1.0, 0.0, 1.0], size=shape)
            elif kind == 2:
                alt = rng.choice([-1.0, 0.0, 1.0], size=shape[::-1])
            elif kind == 3:
                alt = np.where(rng.random(shape) < 0.5, -np.inf, ref)
            else:
                alt = ref.copy()
                alt.flat[0] = np.nan
            alts[f"m{k}"] = alt
        yield ref, alts


def test_clash_free_is_no_clashes():
    for ref, alts in _cases(np.random.default_rng(14)):
        for gap in (misconceptions.GAP, 1e-9 + misconceptions.ROUNDING):
            assert clash_free(ref, alts, gap) == (not misconceptions.clashes(ref, alts, gap))


# ---------------------------------------------------------------- kv_cache


def _old_attend(q: np.ndarray, K: np.ndarray, V: np.ndarray, root: float) -> np.ndarray:
    return softmax(q @ K.T / root) @ V  # (1, d_v)


def _old_kv_mistakes_of(given: dict, params: dict, name: str) -> dict[str, np.ndarray]:
    """kv_cache.mistakes_of as it was before issue 14's fast path (the oracle)."""
    K_cache, V_cache, q, k, v = kv_cache._given_rows(given)
    d_k = int(given["d_k"])
    root = math.sqrt(d_k)
    t = K_cache.shape[0]
    K, V = np.vstack([K_cache, k]), np.vstack([V_cache, v])  # (t+1, d_k), (t+1, d_v)
    K_first, V_first = np.vstack([k, K_cache]), np.vstack([v, V_cache])  # the new row put first
    K_query = np.vstack([K_cache, q])  # the query cached in the place of the key
    S = q @ K.T  # (1, t+1)
    A = softmax(S / root)
    found: dict[str, np.ndarray] = {}
    if name == "K":
        found = {"kv_new_row_first": K_first, "kv_query_cached": K_query}
    elif name == "V":
        found = {"kv_new_row_first": V_first}
    elif name == "scores":
        found = {"kv_new_row_first": q @ K_first.T, "kv_query_cached": q @ K_query.T}
    elif name == "A":
        own_masked = np.zeros_like(A)  # the new position hidden as if it were in the future
        own_masked[:, :t] = softmax(S[:, :t] / root)
        found = {"kv_new_row_masked": own_masked, "kv_new_row_first": softmax(q @ K_first.T / root),
                 "kv_query_cached": softmax(q @ K_query.T / root)}
        if d_k != 1:
            found.update(no_scaling=softmax(S), scaled_by_dk=softmax(S / d_k),
                         scaled_times_sqrt_dk=softmax(S * root))
        total = (S / root).sum()
        if abs(total) > 1e-9:
            found["no_exp"] = S / root / total
        found["softmax_no_normalise"] = np.exp(S / root)
    elif name == "O":
        # with the new position masked (A's last weight 0) the output is this same stale one
        found = {"kv_new_key_left_out": _old_attend(q, K_cache, V_cache, root),
                 "kv_stale_value": A[:, :t] @ V_cache,  # the new weight dropped with the missing row of V
                 "kv_query_cached": _old_attend(q, K_query, V, root)}
        if d_k != 1:
            found.update(no_scaling=softmax(S) @ V, scaled_by_dk=softmax(S / d_k) @ V)
    elif name == "cache_floats":
        n, h, d = params["layers"], params["heads"], params["d_head"]
        found = {"kv_cache_size_one_of_k_v": n * h * (t + 1) * d, "kv_cache_size_before_step": 2 * n * h * t * d,
                 "kv_cache_size_one_layer": 2 * h * (t + 1) * d, "kv_cache_size_one_head": 2 * n * (t + 1) * d}
        found = {mid: np.array([[float(x)]]) for mid, x in found.items()}
    return found


def _old_apart_from_careful(ex: Exercise) -> bool:
    from exercises.core.grading import declared_decimals

    careful = kv_cache.chain(ex, {}, declared_decimals(ex))
    for part in ex.parts:
        gap = misconceptions.separation(part)
        for alt in _old_kv_mistakes_of(ex.given, ex.params, part.name).values():
            if np.shape(alt) == part.shape and not misconceptions.apart(alt, careful[part.name], gap):
                return False
    return True


def _kv_drafts():
    """Every draw of the generator (kept or not) for a few seeds of each level."""
    for level in kv_cache.LEVELS:
        rng = engine.rng_for("kv_cache", 0, level)
        for _ in range(150):
            given, params = kv_cache._draw(rng, level)
            yield level, given, params


def test_kv_cache_mistakes_at_once_are_the_old_mistakes_part_by_part():
    for _, given, params in _kv_drafts():
        for name in kv_cache.PARTS:
            slow, fast = _old_kv_mistakes_of(given, params, name), kv_cache.mistakes_of(given, params, name)
            assert list(fast) == list(slow), name
            assert all(np.array_equal(fast[mid], slow[mid]) and fast[mid].shape == slow[mid].shape for mid in slow)


def test_kv_cache_checks_decide_as_the_old_ones():
    from exercises.kinds._shared.hand import all_apart

    for level, given, params in _kv_drafts():
        refs = kv_cache.references_of(given, params)
        parts = kv_cache._parts(refs, level)
        decimals = spec(level).decimals
        assert [(p.name, p.decimals) for p in parts] == [(n, numbers.decimals_for(r, decimals)) for n, r in refs.items()]
        mistakes = kv_cache._mistakes(given, params)
        clear = all_apart(parts, lambda p, g=given, q=params: _old_kv_mistakes_of(g, q, p.name))
        assert all_clash_free(parts, mistakes) == clear
        assert kv_cache._sizes_apart(params) == all_apart(parts[-1:], lambda p, m=mistakes: m[p.name])
        if clear:
            ex = Exercise(kind="kv_cache", seed=0, level=level, version=kv_cache.VERSION, given=given,
                          parts=tuple(parts), params=params)
            assert kv_cache._apart_from_careful(ex, mistakes, apart_from_answers=True) == _old_apart_from_careful(ex)


def _plain_nonzero_matrix(rng, shape, values):
    """numbers.nonzero_matrix as it was written before its fast path: draw, test, draw again."""
    while True:
        M = numbers.matrix(rng, shape, values)
        if np.all(np.any(M != 0, axis=1)) and np.all(np.any(M != 0, axis=0)):
            return M


def test_nonzero_matrix_draws_as_the_plain_redraw():
    for shape, values in (((2, 1), (0, 1, 2)), ((3, 4), (-1, 0, 1, 2)), ((1, 2), (-2, -1, 1, 2)), ((1, 3), (0, 1)),
                          ((1, 1), (0, 1))):
        slow, fast = np.random.default_rng(7), np.random.default_rng(7)
        for _ in range(500):
            assert np.array_equal(_plain_nonzero_matrix(slow, shape, values),
                                  numbers.nonzero_matrix(fast, shape, values))
        assert slow.integers(1 << 30) == fast.integers(1 << 30)  # the same state after


def test_apart_from_is_misconceptions_apart_for_each():
    for ref, alts in _cases(np.random.default_rng(15)):
        gap = misconceptions.GAP
        slow = all(misconceptions.apart(a, ref, gap) for a in alts.values() if np.shape(a) == ref.shape)
        assert apart_from(ref, alts, gap) == slow


def test_kv_cache_most_minutes_bounds_the_count():
    for level, given, params in _kv_drafts():
        parts = kv_cache._parts(kv_cache.references_of(given, params), level)
        ex = Exercise(kind="kv_cache", seed=0, level=level, version=kv_cache.VERSION, given=given,
                      parts=tuple(parts), params=params)
        assert kv_cache._operations(ex).minutes <= kv_cache._most_minutes(params)


def test_rope_table_of_halves_is_sympys():
    for degrees in range(-360, 721, 30):
        assert rope.HALVES_30[degrees % 360] == rope._halves_of_sympy(degrees), degrees
