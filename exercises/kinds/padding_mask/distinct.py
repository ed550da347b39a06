"""padding_mask's redraw question in closed form (issue 14: a constructive generator).

The guarded mistakes split in two:

- at M (padding_on_queries, padding_ignored, no_mask): a wrong 0/−∞ pattern. The registry names it at M
  only (Z̃ reads M as the given values' side, not as a step input: no later value is marked as that
  mistake's), where it is told apart exactly when its pattern differs from the right one (a −∞ cell is
  never taken for a number) and from the other mistakes' patterns: a question of the padding and the
  causal flag alone, answered once per pattern by misconceptions itself (`pattern_apart`). The careful
  student's M and Z̃ are the references (no value there needs rounding: Z holds halves);
- at A (mask_zero_instead_of_inf, no_exp, softmax_no_normalise, padding_after_softmax,
  padding_empty_row_uniform): `check_weights` computes every one with the registry's own expressions on
  the same inputs (the same floats) and compares them at once, as misconceptions.collides and
  _shared.apart.apart_from_rounded do. A value with a NaN or an infinity (no_exp over an empty row, or
  over visible scores that sum to 0, which then holds a +∞) is what misconceptions leaves out: it is
  never close to anything here either.

tests/test_kinds_padding_mask_constructive.py holds both to misconceptions and apart_from_rounded.
"""

from __future__ import annotations

import functools

import numpy as np

from attention_core import ops

from ...core import misconceptions
from ...core.draft import reference_parts
from ...core.model import Exercise
from ...core.numbers import round_half_up

GAP = misconceptions.GAP  # the separation of A (2 decimals, or 0 when every weight is whole)
M_MISTAKES = ("padding_on_queries", "padding_ignored", "no_mask")  # named at M alone (pattern_apart)
A_MISTAKES = ("mask_zero_instead_of_inf", "no_exp", "softmax_no_normalise", "padding_after_softmax",
              "padding_empty_row_uniform")
DRIFT = 0.005 + 1e-9  # the careful A is the reference A rounded to 2 places (Z̃ needs no rounding)


@functools.cache
def pattern_apart(pad: tuple[int, ...], causal: bool, guards: tuple[str, ...]) -> bool:
    """Every guarded mistake of M gives M and Z̃ apart from the right ones and from each other, for this
    padding and causal flag (misconceptions.collides on an exercise asking M and Z̃ only: what the
    scores are changes nothing there)."""
    n = len(pad)
    given = {"scaled": np.zeros((n, n)), "pad": np.array([pad], dtype=float), "causal": causal}
    ex = Exercise(kind="padding_mask", seed=0, level=1, version=0, given=given,
                  parts=tuple(reference_parts(given, ["M", "masked"], 2)), params={})
    return not misconceptions.collides(ex, guards=guards)


@functools.cache
def pattern(pad: tuple[int, ...], causal: bool, guards: tuple[str, ...]):
    """What every variant of one padding and causal flag shares: the additive masks to add to Z, stacked
    (the right M, then the causal mask alone for padding_after_softmax when it is guarded), the cells M
    hides and the queries that see no key (read-only)."""
    flags = np.array(pad, dtype=bool)
    M = ops.padding_mask(flags, causal)
    masks = [M]
    if "padding_after_softmax" in guards:
        masks.append(ops.padding_mask(np.zeros(flags.size), causal))  # Z + this = ops.apply_mask(Z, causal)
    stack = np.stack(masks)
    hidden = np.isneginf(M)
    empty = hidden.all(axis=-1)
    for array in (stack, hidden, empty):
        array.setflags(write=False)
    return stack, hidden, empty


def weights_table(env: dict, guards, key: tuple | None = None) -> np.ndarray:
    """The reference A and every guarded mistake's A, one row each ((1 + k, n·n), the reference first),
    from the pipeline's values `env`; `key`: (pad, causal) when the caller has it."""
    guards = tuple(guards)
    Z, masked = env["scaled"], env["masked"]
    if key is None:
        key = (tuple(int(p) for p in np.asarray(env["pad"]).ravel().tolist()), bool(env.get("causal", False)))
    stack, hidden, empty = pattern(*key, guards)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inputs = Z + stack  # Z̃ (the pipeline's scaled + M), then the causally masked Z
        zeroed = "mask_zero_instead_of_inf" in guards and hidden.any()
        if zeroed:  # the given −∞ read as 0: no −∞ left, so softmax_visible's rows are ops.softmax's
            inputs = np.concatenate([inputs, np.where(hidden, 0.0, masked)[None]])
        A_all = ops.softmax_visible(inputs)  # row by row
        if "padding_after_softmax" in guards:
            A_all[len(stack) - 1][hidden] = 0.0  # then padded keys zeroed without renormalising
        extra = []
        if "no_exp" in guards:
            finite = np.where(hidden, 0.0, masked)  # Z̃ is finite where M is 0
            extra.append(finite / finite.sum(axis=1, keepdims=True))
        if "softmax_no_normalise" in guards:
            extra.append(np.exp(masked))
        if "padding_empty_row_uniform" in guards and empty.any():
            uniform = np.array(A_all[0])
            uniform[empty] = 1.0 / masked.shape[1]
            extra.append(uniform)
        table = np.concatenate([A_all, np.stack(extra)]) if extra else A_all
    return table.reshape(len(table), -1)


def check_weights(env: dict, guards, reference: np.ndarray | None = None,
                  key: tuple | None = None) -> tuple[bool, bool]:
    """(collides, apart) at A from the pipeline's values `env`; `reference`: the part's own reference
    (the same values as the pipeline's)."""
    table = weights_table(env, guards, key)
    if reference is not None:
        table[0] = np.asarray(reference).reshape(-1)
    return decide_table(table)


def decide_table(table: np.ndarray) -> tuple[bool, bool]:
    """(collides, apart) of weights_table's rows: some guarded mistake's A within GAP of the reference
    (row 0) in every cell, or of another's; every one apart from the careful A (the reference rounded
    to 2 places). With a clash the careful A is not looked at: (True, True)."""
    with np.errstate(invalid="ignore"):
        widest = np.abs(table[:, None] - table[None]).max(axis=-1)  # NaN and ∞ are never close
    if (widest[_clash(len(table) - 1)] <= GAP).any():
        return True, True
    if not (widest[0, 1:] <= GAP + DRIFT).any():
        return False, True  # every mistake farther from the reference than the careful A can be
    careful = round_half_up(table[0], 2)
    with np.errstate(invalid="ignore"):
        return False, not bool((np.abs(table[1:] - careful).max(axis=-1) <= GAP).any())


@functools.cache
def _clash(k: int) -> np.ndarray:
    """The pairs of check_weights' table a clash is looked for in: the reference (row 0) and a mistake,
    two mistakes; each pair once."""
    cells = np.triu(np.ones((k + 1, k + 1), dtype=bool), k=1)
    cells.setflags(write=False)
    return cells
