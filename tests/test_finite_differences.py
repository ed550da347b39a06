"""Every backward kind's reference agrees with central finite differences of the loss it differentiates."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from attention_core import embed, softmax
from attention_core.ops import apply_mask, scale, weighted_sum
from exercises.core.model import Exercise
from tests import generated

BACKWARD = ["grad_weighted_sum", "grad_value_proj", "grad_softmax", "grad_scores", "grad_projections",
            "grad_embedding"]  # backprop: tests/kinds/test_backprop.py


KIND_LEVELS = [(k, level) for k in BACKWARD for level in (1, 2, 3)]


FD_SEEDS = range(12)


STEP = 1e-6


FD_TOL = 1e-6  # absolute, on answers of size ≲ 100; the loss is smooth near every given point


def central_difference(loss: Callable[[dict[str, np.ndarray]], float], point: dict[str, np.ndarray],
                       name: str) -> np.ndarray:
    """∂loss/∂point[name], cell by cell: (L(x + h) − L(x − h)) / 2h."""
    base = np.array(point[name], dtype=float)
    grad = np.zeros_like(base)  # same shape as point[name]
    for idx in np.ndindex(base.shape):
        values = []
        for sign in (1.0, -1.0):
            moved = base.copy()
            moved[idx] += sign * STEP
            values.append(loss({**point, name: moved}))
        grad[idx] = (values[0] - values[1]) / (2 * STEP)
    return grad


def given_arrays(ex: Exercise) -> dict[str, np.ndarray]:
    return {k: np.array(v, dtype=float) for k, v in ex.matrices().items()}


def loss_weighted_sum(p):
    return float(np.sum(weighted_sum(p["A"], p["V"]) * p["G_O"]))


def loss_value_proj(p):
    return float(np.sum(p["X"] @ p["W_V"] * p["G_V"]))  # V = X W_V


def softmax_loss(causal: bool):
    def loss(p):
        return float(np.sum(softmax(apply_mask(p["Z"], causal)) * p["G_A"]))
    return loss


def scores_loss(d_k: int):
    def loss(p):
        S = p["S"] if "S" in p else p["Q"] @ p["K"].T  # (n, n)
        return float(np.sum(scale(S, d_k) * p["G_scaled"]))
    return loss


def loss_projections(p):
    return float(sum(np.sum(p["X"] @ p[f"W_{m}"] * p[f"G_{m}"]) for m in "QKV"))


def embedding_loss(token_ids):
    def loss(p):
        return float(np.sum(embed(token_ids, p["E"]) * p["G_X"]))
    return loss


def softmax_input(A: np.ndarray) -> np.ndarray:
    """Scores whose row-wise softmax is A (a zero weight gets a score far below the others)."""
    with np.errstate(divide="ignore"):
        return np.where(A > 0, np.log(np.where(A > 0, A, 1.0)), -60.0)  # (n, n)


def finite_differences(ex: Exercise) -> dict[str, np.ndarray]:
    """{part name: the finite-difference gradient} for every part of `ex`."""
    g, p = ex.given, given_arrays(ex)
    causal = bool(g.get("causal", False))
    if ex.kind == "grad_weighted_sum":
        return {"G_A": central_difference(loss_weighted_sum, p, "A"),
                "G_V": central_difference(loss_weighted_sum, p, "V")}
    if ex.kind == "grad_value_proj":
        return {"G_W_V": central_difference(loss_value_proj, p, "W_V"),
                "G_X_V": central_difference(loss_value_proj, p, "X")}
    if ex.kind == "grad_softmax":
        point = {"Z": softmax_input(p["A"]), "G_A": p["G_A"]}
        np.testing.assert_allclose(softmax(apply_mask(point["Z"], causal)), p["A"], atol=1e-12)
        return {"G_scaled": central_difference(softmax_loss(causal), point, "Z")}
    if ex.kind == "grad_scores":
        loss = scores_loss(int(g["d_k"]))
        out = {"G_Q": central_difference(loss, p, "Q"), "G_K": central_difference(loss, p, "K")}
        out["G_scores"] = central_difference(loss, {**p, "S": p["Q"] @ p["K"].T}, "S")
        return out
    if ex.kind == "grad_projections":
        return {name: central_difference(loss_projections, p, name[2:] if name != "G_X" else "X")
                for name in ("G_W_Q", "G_W_K", "G_W_V", "G_X")}
    if ex.kind == "grad_embedding":
        return {"G_E": central_difference(embedding_loss(g["token_ids"]), p, "E")}
    raise AssertionError(ex.kind)


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_references_agree_with_finite_differences(kind_id, level):
    for seed in FD_SEEDS:
        ex = generated.exercise(kind_id, seed, level)
        numeric = finite_differences(ex)
        for part in ex.parts:
            np.testing.assert_allclose(part.reference, numeric[part.name], atol=FD_TOL, rtol=0,
                                       err_msg=f"{kind_id} L{level} s{seed} {part.name}")
