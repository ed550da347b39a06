"""The worked solutions' text is byte-identical to what it was before the speed work of issue 14
(lazy exact forms, caches keyed by values): a fingerprint per kind over every level and two seeds,
of every field a solution shows (each step's records, both displays, every cell's derivation, the aids).
The kinds pinned here are those that existed when the fingerprints were taken, with kv_cache and gqa
added when they were merged, and concepts retaken at its VERSION 3 (a question added at level 3).

Floats written out in full (a step's value, a substitution's float) are read to 9 significant digits
(_portable): their last bits are the machine's (the fingerprints taken on one CPU failed for backprop and
variance on another with the same code and packages). Everything a learner reads is compared as written."""

from __future__ import annotations

import hashlib
import re

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


# a float as repr writes it when it is the result of arithmetic: ten or more digits after the point, or an
# exponent. Its last bits depend on the machine (numpy's SIMD kernels for exp and log, OpenBLAS's kernel
# for the CPU: 0.16000000000000003 on one, 0.15999999999999998 on another), so it is read to 9
# significant digits; what a learner sees (2 or 4 places, exact forms) is compared as written.
LONG_FLOAT = re.compile(r"-?\d+\.\d{10,}(?:e[-+]?\d+)?|-?\d+(?:\.\d+)?e[-+]?\d+")


def _portable(text: str) -> str:
    def short(match: re.Match) -> str:
        x = float(match.group())
        return "0.0" if abs(x) < 1e-12 else format(x, ".9g")

    return LONG_FLOAT.sub(short, text)


def fingerprint(kind: str, levels) -> str:
    digest = hashlib.sha256()
    for level in levels:
        for seed in SEEDS:
            digest.update(_portable(solution_text(generate(kind, seed, level))).encode())
    return digest.hexdigest()[:16]


PRINTS = {
    "projection": "218cc4d1732bf945",
    "scores": "4756a9e3b123a2ab",
    "scaling": "7bd96282c44d724d",
    "masking": "2d7da352d1ae7b40",
    "padding_mask": "2ddacc84dbf2ddcd",  # VERSION 2: constructive generator (issue 14)
    "softmax": "aa1100bd9d752cd6",
    "weighted_sum": "ce43b29783095fae",
    "attention": "e002ac55c2d9284c",  # VERSION 5: constructive generator (issue 14)
    "cross_attention": "cba9e0f30932154c",  # VERSION 2: constructive generator (issue 14)
    "multi_head": "1a1f92a1f1cd9b45",  # VERSION 5: constructive generator (issue 14)
    "rope": "e0dfc2b8d89c5192",  # VERSION 2: constructive generator (issue 14)
    "positional": "89f1a4e2663a0557",
    "shapes": "80afe069bdf3cfbb",
    "variance": "e4259491a736ab0a",
    "softmax_jacobian": "f543090caf70adfb",
    "concepts": "5cd605f490472d5f",  # VERSION 3: level 3 asks what RoPE rotates
    "grad_weighted_sum": "309ae8e0dee382d9",
    "grad_value_proj": "b71d89644859e9b9",
    "grad_softmax": "a660c340f4cc858b",  # VERSION 3: constructive generator (issue 14)
    "grad_scores": "0088320fb98ad70a",
    "grad_projections": "f86bb91a87ba766d",
    "grad_embedding": "7fb08ecbb98f2959",
    "backprop": "7d446d8aa615a67c",  # VERSION 4: constructive generator (issue 14)
    "backprop_loss": "55b56eef4baf64a0",  # VERSION 2: constructive generator (issue 14)
    "grad_multi_head": "175cbaf0aa4a0f93",  # VERSION 2: constructive generator (issue 14)
    "kv_cache": "202ed68bddf186b8",  # VERSION 2: constructive generator (issue 14); V's column tried one by one (wave 7)
    "gqa": "14016a108633590e",  # VERSION 2: constructive generator (issue 14)
}


def test_portable_reads_machine_bits_alike_and_shown_decimals_as_written():
    assert _portable("[[0.16000000000000003, -4.163336342344337e-17]]") == _portable("[[0.15999999999999998, 0.0]]")
    assert _portable("[[0.16000000000000003]]") != _portable("[[0.16100000000000003]]")
    shown = r"\frac{2 \sqrt{2}}{25} \approx 0.11, -0.9803, 0.000123 places=2"
    assert _portable(shown) == shown


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
