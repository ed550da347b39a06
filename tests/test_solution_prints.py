"""The worked solutions' text is byte-identical to what it was before the speed work of issue 14
(lazy exact forms, caches keyed by values): a fingerprint per kind over every level and two seeds,
of every field a solution shows (each step's records, both displays, every cell's derivation, the aids).
The kinds pinned here are those that existed when the fingerprints were taken, with kv_cache and gqa
added when they were merged, and concepts retaken at its VERSION 3 (a question added at level 3)."""

from __future__ import annotations

import hashlib

import pytest

import exercises
from exercises import aids, solve
from exercises.core.engine import generate

SEEDS = (0, 7)



def _text(value) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_text(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_text(v) for v in value) + "]"
    if hasattr(value, "key") and hasattr(value, "params"):  # a Msg
        return f"Msg({value.key},{_text(value.params)})"
    return repr(value)


def solution_text(ex) -> str:
    """Every field a worked solution shows: each step's records, both displays, every cell, the aids."""
    parts = []
    for step in solve(ex):
        parts += [step.name, _text(step.title), step.symbol, step.lhs, step.formula, step.latex,
                  _text(step.decimals), _text(step.exact), _text(step.exact_cells), _text(step.work),
                  _text(step.work_decimal), _text(step.note), _text(step.work_result),
                  _text(step.work_substitutions), step.display(True), step.display(False),
                  repr(step.value.tolist()), str(step.places)]
        for i in range(step.shape[0]):
            for j in range(step.shape[1]):
                cell = step.cell(i, j)
                parts += [cell.latex, _text(cell.note), _text(cell.substitutions)]
    parts += aids(ex).latex_strings()
    return "\n".join(parts)


def fingerprint(kind: str, levels) -> str:
    digest = hashlib.sha256()
    for level in levels:
        for seed in SEEDS:
            digest.update(solution_text(generate(kind, seed, level)).encode())
    return digest.hexdigest()[:16]


PRINTS = {
    "projection": "218cc4d1732bf945",
    "scores": "4756a9e3b123a2ab",
    "scaling": "86a0afeb3b063a13",
    "masking": "e159e53aef68d5ca",
    "padding_mask": "fd5797f565a20e4d",  # VERSION 2: constructive generator (issue 14)
    "softmax": "92bb9cd06871174c",
    "weighted_sum": "3ba28ef0b11745ae",
    "attention": "1c3cfb5c8c80b33e",  # VERSION 5: constructive generator (issue 14)
    "cross_attention": "e0ea666ce3e51b13",  # VERSION 2: constructive generator (issue 14)
    "multi_head": "8e0eee8f39187be1",  # VERSION 5: constructive generator (issue 14)
    "rope": "e637214b2262953d",  # VERSION 2: constructive generator (issue 14)
    "positional": "e62ab97a2d3c2682",
    "shapes": "80afe069bdf3cfbb",
    "variance": "4f7798883f285f4e",
    "softmax_jacobian": "2fc32f9938e58b10",
    "concepts": "e17f48465788df82",  # VERSION 3: level 3 asks what RoPE rotates
    "grad_weighted_sum": "98df4d597122974b",
    "grad_value_proj": "b71d89644859e9b9",
    "grad_softmax": "8162f999606339dd",  # VERSION 3: constructive generator (issue 14)
    "grad_scores": "b1584ddbaafd0102",
    "grad_projections": "f86bb91a87ba766d",
    "grad_embedding": "7fb08ecbb98f2959",
    "backprop": "0fc6367de58914b2",  # VERSION 4: constructive generator (issue 14)
    "backprop_loss": "b49756a0eb4129fe",  # VERSION 2: constructive generator (issue 14)
    "grad_multi_head": "d52889418b084825",  # VERSION 2: constructive generator (issue 14)
    "kv_cache": "08ff2b256aba8cf6",  # VERSION 2: constructive generator (issue 14); V's column tried one by one (wave 7)
    "gqa": "d9ff2fbc28ef4447",  # VERSION 2: constructive generator (issue 14)
}


@pytest.mark.parametrize("kind", sorted(PRINTS))
def test_the_worked_solution_text_is_unchanged(kind):
    assert fingerprint(kind, exercises.KINDS[kind].LEVELS) == PRINTS[kind]


def test_solve_builds_a_step_and_the_exact_forms_only_when_they_are_asked_for():
    """Issue 14: a solution nobody opens costs the walk only; the first look builds the step, once."""
    import copy

    from exercises.solutions import exercise_context

    ex = generate("attention", 12345, 2)
    steps = solve(ex)
    ctx = exercise_context(ex)
    assert [s.shape for s in steps] == [ex.part(s.name).shape for s in steps]  # known without building
    assert all(s._step is None for s in steps) and callable(ctx.exact_source)
    latex = steps[3].display(True)
    assert steps[3]._step is not None and steps[3].built() is steps[3].built()
    assert not callable(ctx.exact_source) and all(s._step is None for s in steps[4:])
    assert copy.deepcopy(steps[4]).name == steps[4].name and latex == solve(ex)[3].display(True)


if __name__ == "__main__":  # after a deliberate change to solutions: python -m tests.test_solution_prints
    for name in sorted(PRINTS):
        print(f'    "{name}": "{fingerprint(name, exercises.KINDS[name].LEVELS)}",')
