"""The worked solutions' text is byte-identical to what it was before the speed work of issue 14
(lazy exact forms, caches keyed by values): a fingerprint per kind over every level and two seeds,
of every field a solution shows (each step's records, both displays, every cell's derivation, the aids).
The kinds pinned here are those that existed when the fingerprints were taken, with kv_cache and gqa
added when they were merged, and concepts retaken at its VERSION 3 (a question added at level 3).

Every float (a step's value, a substitution's number) is read to 9 significant digits (_float): its last
bits are the machine's (the fingerprints taken on one CPU failed for backprop and variance on another with
the same code and packages). Everything a learner reads (the texts, the LaTeX) is compared as written."""

from __future__ import annotations

import dataclasses
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
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a substitution, a number in it
        return f"{type(value).__name__}({','.join(_text(getattr(value, f.name)) for f in dataclasses.fields(value))})"
    if isinstance(value, float):
        return _float(value)
    return repr(value)


def _float(x: float) -> str:
    """A float's value to 9 significant digits, every float alike: its last bits depend on the machine
    (numpy's SIMD kernels for exp and log, OpenBLAS's kernel for the CPU: 0.16000000000000003 on one,
    0.15999999999999998 on another, 1.0 against 0.9999999999999999, 0.0 against -4.2e-17)."""
    return "0" if abs(x) < 1e-12 else format(x, ".9g")


def solution_text(ex) -> str:
    """Every field a worked solution shows: each step's records, both displays, every cell, the aids."""
    parts = []
    for step in solve(ex):
        parts += [step.name, _text(step.title), step.symbol, step.lhs, step.formula, step.latex,
                  _text(step.decimals), _text(step.exact), _text(step.exact_cells), _text(step.work),
                  _text(step.work_decimal), _text(step.note), _text(step.work_result),
                  _text(step.work_substitutions), step.display(True), step.display(False),
                  _text(step.value.tolist()), str(step.places)]
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
    "projection": "a6a05074c204f06a",
    "scores": "4f62728f66fb728c",
    "scaling": "b9a04966b12814a5",
    "masking": "bbd7640e1618b6a9",
    "padding_mask": "a14d1805e6c30282",  # VERSION 2: constructive generator (issue 14)
    "softmax": "1c5dd35abf37d179",
    "weighted_sum": "d3f06eb4352bf5db",
    "attention": "88de9e7ea4aa3e1b",  # VERSION 5: constructive generator (issue 14)
    "cross_attention": "a506178bf5bafd46",  # VERSION 2: constructive generator (issue 14)
    "multi_head": "6d4938602d4d4a4b",  # VERSION 5: constructive generator (issue 14)
    "rope": "2f1ba835cda1ed53",  # VERSION 2: constructive generator (issue 14)
    "positional": "d89fa7a84e29be76",
    "shapes": "967ac989c50d1c66",
    "variance": "4f3f2d6ee397a23d",
    "softmax_jacobian": "621d2932a84d936f",
    "concepts": "7f29847fcb096a75",  # VERSION 3: level 3 asks what RoPE rotates
    "grad_weighted_sum": "aa994025044348ce",
    "grad_value_proj": "44479dfd1ebf3c26",
    "grad_softmax": "8d7e700f292af27d",  # VERSION 3: constructive generator (issue 14)
    "grad_scores": "5c33233d6cdd7dc1",
    "grad_projections": "ada3055c4a3c608c",
    "grad_embedding": "413c453ed055cd30",
    "backprop": "3c092f0d06a49c0b",  # VERSION 4: constructive generator (issue 14)
    "backprop_loss": "48f7beffb5003b9e",  # VERSION 2: constructive generator (issue 14)
    "grad_multi_head": "20a7aaf34ddc3c8d",  # VERSION 2: constructive generator (issue 14)
    "kv_cache": "f6d320ab80f62160",  # VERSION 2: constructive generator (issue 14); V's column tried one by one (wave 7)
    "gqa": "9e474d033e778a20",  # VERSION 2: constructive generator (issue 14)
}


def test_floats_are_read_alike_across_machines_and_shown_text_as_written():
    assert _text([0.16000000000000003, -4.163336342344337e-17, 1.0, -0.0]) == \
        _text([0.15999999999999998, 0.0, 0.9999999999999999, 0.0])
    assert _text([0.16000000000000003]) != _text([0.16100000000000003])
    shown = r"\frac{2 \sqrt{2}}{25} \approx 0.11, -0.9803, 1.00"
    assert _text(shown) == repr(shown)


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
