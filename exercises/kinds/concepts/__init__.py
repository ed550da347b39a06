"""Concept questions from the reference notes: multiple choice and short numeric answers.

A multiple-choice part has `options` = catalog keys ``concepts.<question>.<option>`` in a random order
and `reference` = [[index of the right one]]. Each wrong option has its own explanation under
``misconception.concepts.<question>.<option>``: explain() returns it when that option is chosen, and
it says why the choice is wrong without naming the right one.

Choices cannot be gamed by their look: within each question the options are about as long as one
another (the right one at most 1.3× the longest wrong one, and the longest no more often than chance
over all questions, in every language), and each level draws from at least six questions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from ... import solutions
from ...core import misconceptions
from ...core.contract import HomeStage
from ...core.draft import Draft
from ...core.model import Exercise, Part
from ...core.numbers import choice
from ...i18n import Msg, msg
from ...rendering import latex as L
from ...solutions import Aids, ExpEntry
from ...solutions.aids import ExpSeries

ID = "concepts"
ORDER = 110
VERSION = 4
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {2: (ExpSeries(1, 1, -4, 0),), 3: (ExpSeries(1, 1, -4, 0),)}
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ()
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("concepts_fixed_mixing", "concepts_weight_variance")

Params = dict[str, int]


def _no_params(rng: np.random.Generator) -> Params:
    return {}


def _cell_params(rng: np.random.Generator) -> Params:
    """n tokens and a cell (i, j) off the diagonal, 1-based, so that swapping i and j shows."""
    n = choice(rng, (3, 4, 5))
    i, j = (int(x) + 1 for x in rng.choice(n, size=2, replace=False))
    return {"n": n, "i": i, "j": j}


def _query_params(rng: np.random.Generator) -> Params:
    """n tokens and a query i strictly inside (1 < i < n), so that "up to i", "before i" and "from i" differ."""
    n = choice(rng, (4, 5, 6))
    i = int(rng.integers(2, n))
    return {"n": n, "i": i, "i_before": i - 1}


def _row_params(rng: np.random.Generator) -> Params:
    return {"i": int(rng.integers(1, 4))}


def _repeat_params(rng: np.random.Generator) -> Params:
    """A token id t at two positions p < r (counted from 1); t is neither, so "row t of G_X" is another row."""
    p, r = sorted(int(x) for x in rng.choice(np.arange(1, 6), size=2, replace=False))
    t = choice(rng, [x for x in range(1, 9) if x not in (p, r)])
    return {"t": t, "p": p, "r": r}


@dataclass(frozen=True)
class MultipleChoice:
    id: str
    right: str  # option id of the right answer
    wrong: tuple[str, ...]  # option ids of the wrong answers, each with its own explanation
    draw: Callable[[np.random.Generator], Params] = _no_params


@dataclass(frozen=True)
class ShortAnswer:
    id: str
    decimals: int
    draw: Callable[[np.random.Generator], Params]  # the numbers in the question
    solve: Callable[[Params], tuple[float, dict[str, float]]]  # → the answer, {misconception: its value}


def _masked_count(p: Params):
    n = p["n"]
    return n * (n - 1) / 2, {"mask_diagonal": n * (n + 1) / 2}  # the diagonal hidden too


def _softmax_big(p: Params):
    gap = p["b"] - p["a"]
    weight = math.exp(gap) / (1 + math.exp(gap))  # e^b / (e^a + e^b) with e^a divided out: no overflow
    return weight, {"no_exp": p["b"] / (p["a"] + p["b"])}


def _std_dk(p: Params):
    return math.isqrt(p["d_k"]), {"variance_std_confused": p["d_k"]}


def _concat_width(p: Params):
    return p["h"] * p["d_v"], {"shape_concat_one_head": p["d_v"]}


def _neighbour_weight(own: int, other: int) -> float:
    """softmax([own, other])'s second weight, computed as e^0 / (e^(own − other) + e^0) or its mirror: minus the
    larger score, so that only e^0 and e^(−gap) are needed."""
    return 1 / (1 + math.exp(own - other))


def _draw_sentences(rng: np.random.Generator) -> Params:
    """Token 1 (x₁ = a) in two sentences whose neighbour differs (x₂ = b, then c): the scores x₁x₁ and x₁x₂ of
    each sentence at most 4 apart, and the two weights apart to 2 decimals."""
    while True:
        a = choice(rng, (1, 2))
        b, c = (choice(rng, (-1, 0, 1, 2)) for _ in range(2))
        w_a, w_b = _neighbour_weight(a * a, a * b), _neighbour_weight(a * a, a * c)
        if max(abs(a * a - a * b), abs(a * a - a * c)) <= 4 and abs(round(w_a, 2) - round(w_b, 2)) >= 0.05:
            return {"a": a, "b": b, "c": c, "w_a": f"{w_a:.2f}", "own": a * a, "other": a * c}


def _attention_mixing(p: Params):
    """Attention's weight on the neighbour in sentence B; a fixed mixing layer would keep sentence A's."""
    return _neighbour_weight(p["own"], p["other"]), {"concepts_fixed_mixing": float(p["w_a"])}


def _he_init(p: Params):
    """The standard deviation of the weights that keeps Σ w_k x_k at variance 1: 1/√n (its variance is 1/n)."""
    return 1 / math.sqrt(p["n"]), {"concepts_weight_variance": 1 / p["n"]}


def _draw_big_pair(rng: np.random.Generator) -> Params:
    a = choice(rng, (100, 500, 1000))
    return {"a": a, "b": a + choice(rng, (1, 2, 3))}


QUESTIONS: dict[str, MultipleChoice | ShortAnswer] = {q.id: q for q in (
    MultipleChoice("score_cell", "query_i_key_j", ("query_j_key_i", "weight", "output"), _cell_params),
    MultipleChoice("k_transposed", "rows_are_tokens", ("symmetry", "v_too", "keeps_small")),
    MultipleChoice("mask_inf", "exp_zero", ("zero_is_zero", "after_softmax", "negative_pull")),
    MultipleChoice("max_shift", "factor_cancels", ("max_weight_one", "approximation", "positive_only")),
    MultipleChoice("rows_sum", "same_denominator", ("scaling", "mask", "columns")),
    MultipleChoice("heads", "other_relations", ("averaged", "same_weights", "more_tokens")),
    MultipleChoice("scale_why", "unit_variance", ("sum_to_one", "by_dk", "speed")),
    MultipleChoice("causal_row", "up_to_i", ("before_only", "from_i", "all"), _query_params),
    MultipleChoice("output_row", "weighted_values", ("weighted_columns", "own_value", "score_sum"), _row_params),
    MultipleChoice("embed_grad", "sum_rows", ("last_row", "average", "row_t"), _repeat_params),
    # the rope kind's parts (Q_rot, K_rot, scores) cannot show a rotated V: its mistake is asked here
    MultipleChoice("rope_rotates", "q_and_k", ("q_k_and_v", "q_only", "same_angle")),
    ShortAnswer("masked_count", 0, lambda rng: {"n": choice(rng, (3, 4, 5, 6, 8))}, _masked_count),
    ShortAnswer("softmax_big", 2, _draw_big_pair, _softmax_big),
    ShortAnswer("std_dk", 0, lambda rng: {"d_k": choice(rng, (16, 64, 100, 256))}, _std_dk),
    ShortAnswer("concat_width", 0, lambda rng: {"h": choice(rng, (2, 4, 8)), "d_v": choice(rng, (4, 16, 64))},
                _concat_width),
    # why attention and not a fixed mixing of the positions: the same token, another neighbour, another weight
    ShortAnswer("attention_mixing", 2, _draw_sentences, _attention_mixing),
    # He initialisation: the variance argument of √d_k, for a layer's weights
    ShortAnswer("he_init", 2, lambda rng: {"n": choice(rng, (4, 16, 25, 100))}, _he_init),
)}

# level: (multiple-choice pool, short-answer pool); an exercise asks two of the first and one of the second
POOLS = {1: (("score_cell", "rows_sum", "mask_inf", "causal_row", "output_row", "heads"), ("masked_count",)),
         2: (("score_cell", "k_transposed", "mask_inf", "max_shift", "causal_row", "output_row", "scale_why"),
             ("masked_count", "softmax_big", "he_init")),
         3: (("k_transposed", "max_shift", "rows_sum", "heads", "scale_why", "output_row", "embed_grad",
              "rope_rotates"),
             ("softmax_big", "std_dk", "concat_width", "attention_mixing", "he_init"))}
CHOICES_PER_EXERCISE = 2


def option_key(question: str, option: str) -> str:
    return f"concepts.{question}.{option}"


def _choice_part(rng: np.random.Generator, q: MultipleChoice) -> Part:
    options = [q.right, *q.wrong]
    order = rng.permutation(len(options))
    keys = tuple(option_key(q.id, options[k]) for k in order)
    right = int(np.flatnonzero(order == 0)[0])
    return Part(name=q.id, shape=(1, 1), reference=[[right]], decimals=0, options=keys,
                prompt=f"concepts.{q.id}.question", params=q.draw(rng))


def _short_part(rng: np.random.Generator, q: ShortAnswer) -> Part:
    params = q.draw(rng)
    answer, _ = q.solve(params)
    return Part(name=q.id, shape=(1, 1), reference=[[answer]], decimals=q.decimals,
                prompt=f"concepts.{q.id}.question", params=params)


def generate(rng: np.random.Generator, level: int) -> Draft:
    choices, shorts = POOLS[level]
    picked = [choices[k] for k in rng.choice(len(choices), size=CHOICES_PER_EXERCISE, replace=False)]
    parts = [_choice_part(rng, QUESTIONS[qid]) for qid in picked]
    parts.append(_short_part(rng, QUESTIONS[choice(rng, shorts)]))
    return Draft(given={}, parts=parts, params={"count": len(parts)})


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """The chosen wrong option (as ``concepts.<question>.<option>``), or the mistake a number shows."""
    if part.is_choice:
        index = int(value[0, 0])
        return part.options[index] if index != int(part.reference[0, 0]) else None
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    _, mistakes = QUESTIONS[part.name].solve(part.params)
    for mid, wrong in mistakes.items():
        if abs(float(value[0, 0]) - wrong) <= tolerance and abs(wrong - float(part.reference[0, 0])) > tolerance:
            return mid
    return None


def explain(ex: Exercise, part: Part, value: np.ndarray) -> Msg | None:
    """Why the chosen option is wrong (never which one is right); None for a right or numeric answer."""
    mid = diagnose(ex, part, value) if part.is_choice else None
    return Msg(f"misconception.{mid}", dict(part.params)) if mid else None


# ---------------------------------------------------------------- worked solution

class ChoiceStep(solutions.Step):
    """The right option of a multiple-choice part: shown as its letter, never as the option's index."""

    def display(self, exact: bool = True) -> str:
        return self.symbol


# short answer: (its symbol, the formula, the formula with the numbers put in)
def _short_work(qid: str, p: Params) -> tuple[str, str, str]:
    if qid == "masked_count":
        return r"N_{-\infty}", L.frac("n(n-1)", "2"), L.frac(rf"{p['n']} \cdot {p['n'] - 1}", "2")
    if qid == "softmax_big":
        gap = p["b"] - p["a"]
        return (r"a_2", L.frac(L.exp_of(str(p["b"])), f"{L.exp_of(str(p['a']))} + {L.exp_of(str(p['b']))}"),
                L.frac(L.exp_of("0"), f"{L.exp_of(str(-gap))} + {L.exp_of('0')}"))  # minus the larger score b
    if qid == "std_dk":
        return r"\sigma(q \cdot k)", r"\sqrt{d_k}", rf"\sqrt{{{p['d_k']}}}"
    if qid == "attention_mixing":  # minus the larger of the two scores
        top = max(p["own"], p["other"])
        return (r"a_{12}^{(B)}", L.frac(L.exp_of(r"x_1 x_2"), rf"{L.exp_of(r'x_1 x_1')} + {L.exp_of(r'x_1 x_2')}"),
                L.frac(L.exp_of(str(p["other"] - top)), f"{L.exp_of(str(p['own'] - top))} + "
                                                        f"{L.exp_of(str(p['other'] - top))}"))
    if qid == "he_init":
        return r"\sigma_w", L.frac("1", r"\sqrt{n}"), L.frac("1", rf"\sqrt{{{p['n']}}}")
    return r"d_{\mathrm{concat}}", r"h \cdot d_v", rf"{p['h']} \cdot {p['d_v']}"


def solve(ex: Exercise) -> list[solutions.Step]:
    """The right option of each question with its reason, and each short answer worked out."""
    steps = []
    for part in ex.parts:
        title = msg(f"part.{part.name}")
        if part.is_choice:
            right = int(part.reference[0, 0])
            letter = rf"\text{{{chr(ord('A') + right)}}}"
            step = solutions.make_step(part.name, title, part.reference, 0, symbol=letter, exact_cells=[[letter]],
                                       note=Msg(part.options[right], dict(part.params)),
                                       derive=lambda i, j, letter=letter: solutions.CellDerivation(letter))
            steps.append(ChoiceStep(**{f.name: getattr(step, f.name) for f in fields(step)}))
            continue
        symbol, formula, numbers = _short_work(part.name, part.params)
        value = float(part.reference[0, 0])
        result = L.decimal(value, part.decimals)
        rel = "=" if part.decimals == 0 else L.APPROX
        chain = L.chain(symbol, formula, numbers, (rel, result))
        lines = _short_record(part.name, part.params, result)
        steps.append(solutions.make_step(
            part.name, title, part.reference, part.decimals, symbol=symbol, formula=formula,
            work=[("", "=", numbers)], note=msg(f"solution.concepts.{part.name}"),
            derive=lambda i, j, chain=chain, lines=lines: solutions.CellDerivation(chain, None, lines)))
    return steps


def _short_record(qid: str, p: Params, result: str) -> tuple[solutions.Substitution, ...]:
    """The short answer's arithmetic on whole numbers as data (none for e^x and roots)."""
    n = solutions.number
    if qid == "masked_count":
        return (solutions.Substitution("quotient", ((n(str(p["n"])), n(str(p["n"] - 1))), (n("2"),)), result, None),)
    if qid == "concat_width":
        return (solutions.Substitution("sum", ((n(str(p["h"])), n(str(p["d_v"]))),), result, None),)
    return ()


def aids(ex: Exercise) -> Aids:
    """For softmax_big and attention_mixing (the scores minus the larger one, as the questions say to do: e^0
    and e^(−gap)), the level's fixed eˣ grid, which holds both."""
    entries = []
    for part in ex.parts:
        gap = {"softmax_big": lambda p: p["a"] - p["b"],
               "attention_mixing": lambda p: -abs(p["own"] - p["other"])}.get(part.name)
        if gap is not None:
            for x in sorted({0, gap(part.params)}):
                value = math.exp(x)
                text = L.decimal(value, L.EXP_PLACES)
                entries.append(ExpEntry(float(x), str(x), str(x), value, rf"{L.exp_of(str(x))} {L.APPROX} {text}"))
    return solutions.fixed_table(ex, tuple(entries))  # the level's fixed grid when an eˣ is needed


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"Q,\ K,\ V")
