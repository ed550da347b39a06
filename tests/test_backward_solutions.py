"""A backward kind's worked solution derives one cell by the chain rule, states the matrix, then checks it numerically."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.core import pipeline
from tests import generated

BACKWARD = ["grad_weighted_sum", "grad_value_proj", "grad_softmax", "grad_scores", "grad_projections",
            "grad_embedding"]  # backprop: tests/kinds/test_backprop.py


KIND_LEVELS = [(k, level) for k in BACKWARD for level in (1, 2, 3)]


DERIVATIONS = {"grad_weighted_sum": ["chain_G_A", "chain_G_V"], "grad_value_proj": ["chain_G_W_V", "chain_G_X_V"],
               "grad_softmax": ["jacobian"], "grad_scores": ["scale", "chain_G_Q", "chain_G_K"],
               "grad_projections": ["chain_G_W_Q", "chain_G_X"], "grad_embedding": ["chain_G_E"]}


DERIVES = {"chain_G_A": "G_A", "chain_G_V": "G_V", "chain_G_W_V": "G_W_V", "chain_G_X_V": "G_X_V",
           "jacobian": "G_scaled", "scale": "G_scores", "chain_G_Q": "G_Q", "chain_G_K": "G_K",
           "chain_G_W_Q": "G_W_Q", "chain_G_X": "G_X", "chain_G_E": "G_E"}


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_solution_derives_then_states_then_checks(kind_id, level):
    import re

    for seed in range(4):
        ex = generated.exercise(kind_id, seed, level)
        steps = exercises.solve(ex)
        names = [s.name for s in steps]
        assert [n for n in names if n in DERIVES] == DERIVATIONS[kind_id], names
        assert names[-1] == "check"
        env = pipeline.run(ex.given)
        for k, step in enumerate(steps):
            if step.name not in DERIVES:
                continue
            target = DERIVES[step.name]
            assert names[k + 1] == target  # the derivation comes right before its matrix form
            full = np.atleast_2d(ex.part(target).reference if target in ex.part_names else env[target])
            if step.name == "jacobian":  # one whole row of G_Z
                assert any(np.allclose(step.value[0], row) for row in full)
            else:  # one cell, and that cell's value
                assert np.isclose(full, step.value[0, 0], atol=1e-12).any()
            assert exercises.t(step.title.key, **step.title.params) != step.title.key
            assert step.note is not None and exercises.t(step.note.key, **step.note.params) != step.note.key

        check = steps[-1]
        work = check.display(exact=False)
        assert r"L(" in work and "2h" in work
        bound = int(re.search(r"< 10\^\{-(\d+)\}", work).group(1))
        assert bound >= 5  # the finite difference agrees with the analytic cell to 1e-5 or better
        part_values = np.concatenate([p.reference.ravel() for p in ex.parts])
        assert np.isclose(part_values, check.value[0, 0], atol=1e-12).any()
