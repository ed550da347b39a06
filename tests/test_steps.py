"""The step registry: one record per step, read by everything that needs to know a step.

The records are checked against attention_core (an independent oracle for every value), their
mistakes against the catalog (ids, precedence and conditions as the pipeline has always made them),
their exact rules against the float values, and their shapes against the values they compute, with
n_q ≠ n_k as well.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy

import exercises
from attention_core import backward, self_attention
from exercises import solutions
from exercises.core import checkwork, misconceptions, numbers, pipeline, sanity, steps
from exercises.core.exact import xmatmul
from exercises.rendering import latex
from exercises.solutions.exact import _exact_given
from exercises.worksheets import latex_to_typst
from tests.test_katex import katex_errors

NAMES = ("X", "X_norm", "latent", "Q", "K", "V", "phi_Q", "phi_K", "KV", "z", "m", "l", "O_acc", "O", "scores", "scaled",
         "M", "slope", "bias", "masked", "A", "A1", "A2", "a_tau1", "a_tau2", "a_tau3", "s_capped", "a_capped", "O", "Y",
         "G_O", "G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K", "G_W_Q", "G_W_K", "G_W_V", "G_X_V", "G_X", "G_E")

# each step's mistakes in precedence order: pinned, since misconception diagnosis, carry-forward and
# the generator's redraw on a collision all depend on them
SOFTMAX_MISTAKES = ("softmax_columns", "no_exp", "softmax_no_normalise", "mask_zero_instead_of_inf", "mask_after_softmax",
                    "padding_after_softmax", "padding_empty_row_uniform", "alibi_bias_after_softmax")
MISTAKES = {
    "K": ("cross_keys_from_queries",),  # keys and values from H when a memory is given
    "V": ("cross_keys_from_queries",),
    "scores": ("transposed_scores", "scores_not_transposed"),
    "scaled": ("no_scaling", "scaled_by_dk", "scaled_times_sqrt_dk", "scaled_by_sqrt_d_model"),
    "M": ("padding_on_queries", "padding_ignored", "no_mask",  # the additive mask: padding's, then a window's
          "window_too_wide", "window_too_narrow", "window_sinks_forgotten", "window_looks_ahead"),
    "slope": ("alibi_slope_off_by_one",),  # ALiBi's slopes and bias
    "bias": ("alibi_not_causal", "alibi_bias_sign"),
    "masked": ("no_mask", "mask_diagonal", "mask_wrong_triangle", "mask_zero_instead_of_inf", "cross_causal_mask",
               "alibi_bias_scaled"),
    "A": SOFTMAX_MISTAKES,
    "A1": SOFTMAX_MISTAKES,  # a head's weights, where ALiBi asks for several
    "A2": SOFTMAX_MISTAKES,
    **{f"a_tau{k}": ("temperature_times_tau",) for k in (1, 2, 3)},  # temperature and the soft cap
    "s_capped": ("temperature_cap_forgotten",),
    "a_capped": ("temperature_cap_after_softmax",),
    "O": ("weights_transposed",),  # A V, O's main record (the online softmax's o_T / ℓ_T: below)
    "m": ("online_tile_max",),  # the online softmax's running values
    "l": ("online_no_rescale", "online_rescale_inverted", "online_tile_max"),
    "O_acc": ("online_no_rescale", "online_rescale_inverted", "online_divide_per_tile", "online_tile_max"),
    "X_norm": ("norm_over_columns", "norm_variance_unbiased"),  # the attention block's norm and residual
    "Y": ("residual_forgotten", "norm_after_residual"),
    "G_A": ("grad_a_transposed", "grad_a_no_transpose"),
    "G_V": ("grad_v_no_transpose",),
    "G_scaled": ("softmax_grad_missing_term", "softmax_grad_diagonal_only", "softmax_grad_sign"),
    "G_scores": ("grad_scores_no_scale", "grad_scores_times_sqrt_dk"),
    "G_Q": ("grad_q_transposed",),
    "G_K": ("grad_k_no_transpose",),
    "G_X_V": ("grad_x_v_no_transpose",),
    "G_X": ("grad_x_no_value_path", "grad_x_no_key_path", "grad_x_no_query_path", "grad_x_query_path_only",
            "grad_x_key_path_only", "grad_x_value_path_only"),
    "G_E": ("embedding_grad_no_accumulate",),
}


def self_attention_given(seed: int = 0, n: int = 3, d: int = 3, d_k: int = 4, causal: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    return {"X": rng.integers(-2, 3, (n, d)).astype(float), "W_Q": rng.integers(-2, 3, (d, d_k)).astype(float),
            "W_K": rng.integers(-2, 3, (d, d_k)).astype(float), "W_V": rng.integers(-2, 3, (d, 2)).astype(float),
            "G_O": rng.integers(-2, 3, (n, 2)).astype(float), "d_k": d_k, "causal": causal}


def test_every_step_is_one_frozen_record_in_order():
    assert tuple(s.name for s in steps.STEPS) == NAMES
    assert pipeline.STEPS is steps.STEPS and pipeline.STEP_BY_NAME is steps.STEP_BY_NAME
    for step in steps.STEPS:
        assert dataclasses.is_dataclass(step) and step.output == step.name
        with pytest.raises(dataclasses.FrozenInstanceError):
            step.name = "other"
        assert step.direction in ("forward", "backward")
        assert step.builder in solutions.BY_KIND
        assert all(rule in sanity.RULES for rule in step.sanity)
        assert all(axis in steps.AXES for axis in step.shape)
        assert step.formula_latex.startswith(step.symbol) or step.name in ("X", "masked", "A", "G_E")
        assert step.typst_formula.split(" =")[0].split("_(")[0].split("[")[0].strip()


def test_mistakes_are_declared_alternatives_in_the_old_order():
    assert {s.name: s.mistake_ids for s in steps.STEPS if s.mistakes} == MISTAKES  # a name's last record
    assert [s.mistake_ids for s in steps.RECORDS_OF["O"]] == [("online_divide_per_tile",), MISTAKES["O"]]
    for step in steps.STEPS:
        for m in step.mistakes:
            assert m.compute is not step.compute and callable(m.applies)
    made = {m for ids in MISTAKES.values() for m in ids}
    assert made <= set(misconceptions.CATALOG)
    assert made == set(misconceptions.CATALOG)  # every catalogued mistake is one the registry can make


def test_affected_follows_the_declared_mistakes():
    assert pipeline.AFFECTED["transposed_scores"] >= {"scores", "scaled", "masked", "A", "O", "G_X"}
    assert "Q" not in pipeline.AFFECTED["transposed_scores"]
    place = {s.name: i for i, s in enumerate(steps.STEPS)}  # a name's place: its main (last) record's
    assert min(pipeline.AFFECTED["mask_zero_instead_of_inf"], key=place.get) == "masked"
    assert pipeline.AFFECTED["embedding_grad_no_accumulate"] == frozenset({"G_E"})
    assert pipeline.AFFECTED["grad_k_no_transpose"] == frozenset({"G_K", "G_W_K", "G_X", "G_E"})


def test_the_first_applicable_mistake_of_a_step_wins():
    given = self_attention_given()
    both = pipeline.run(given, mistakes={"no_exp", "softmax_columns"})
    columns = pipeline.run(given, mistakes={"softmax_columns"})
    assert both.used == {"softmax_columns"} and np.array_equal(both["A"], columns["A"])
    # a mistake that cannot apply is not made: d_k = 1 has nothing to scale
    one = pipeline.run({**given, "d_k": 1}, mistakes={"no_scaling"})
    assert not one.used and "scaled" not in one.tainted
    # no mask mistake without a causal mask
    open_ = pipeline.run({**given, "causal": False}, mistakes={"no_mask", "mask_diagonal"})
    assert not open_.used


def test_steps_agree_with_attention_core():
    for seed in range(5):
        given = self_attention_given(seed, causal=bool(seed % 2))
        env = pipeline.run(given)
        tr = self_attention(given["X"], given["W_Q"], given["W_K"], given["W_V"], causal=given["causal"])
        g = backward(tr, given["G_O"])
        for name in ("Q", "K", "V", "scores", "scaled", "masked", "A", "O"):
            assert np.allclose(env[name], getattr(tr, name)), name
        for name in ("G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K", "G_W_Q", "G_W_K", "G_W_V", "G_X"):
            assert np.allclose(env[name], getattr(g, name)), name


def test_compute_functions_leave_their_inputs_alone():
    given = self_attention_given()
    env = pipeline.run(given)
    frozen = {}
    for name, value in env.items():
        if isinstance(value, np.ndarray):
            value = value.copy()
            value.setflags(write=False)
        frozen[name] = value
    for step in steps.STEPS:
        if step.runs_on(frozen.keys()) is not None:
            step.compute(frozen)
            for m in step.mistakes:
                if m.applies(frozen):
                    m.compute(frozen)


def test_shapes_in_named_axes_hold_also_for_rectangular_attention():
    given = self_attention_given(n=3, d=2)
    env = pipeline.run(given)
    sizes = {"n": 3, "d_model": 2, "d_k": 4, "d_v": 2}
    for step in steps.STEPS:
        if step.name in env:
            assert env[step.name].shape == steps.shape_of(step.name, sizes), step.name
    # cross-attention shapes: 2 queries over 3 keys
    rng = np.random.default_rng(1)
    cross = {"Q": rng.integers(-2, 3, (2, 4)).astype(float), "K": rng.integers(-2, 3, (3, 4)).astype(float),
             "V": rng.integers(-2, 3, (3, 2)).astype(float), "G_O": rng.integers(-2, 3, (2, 2)).astype(float),
             "d_k": 4}
    env = pipeline.run(cross)
    sizes = {"n_q": 2, "n_k": 3, "d_k": 4, "d_v": 2}
    for name in ("scores", "scaled", "masked", "A", "O", "G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K"):
        assert env[name].shape == steps.shape_of(name, sizes), name


def test_exact_rules_agree_with_the_values():
    given = self_attention_given(causal=True)
    env = pipeline.run(given)
    exact = {name: _exact_given(v) for name, v in given.items()}
    for step in steps.STEPS:
        if step.exact is None or step.name not in env or step.runs_on(exact.keys()) is None:
            continue
        xm = step.exact(exact, env)
        exact[step.name] = xm
        for (i, j), cell in np.ndenumerate(xm):
            if cell is not None:
                assert float(cell) == pytest.approx(env[step.name][i, j], abs=1e-9), (step.name, i, j)
    assert exact["scores"][0, 0] == xmatmul(exact["Q"], exact["K"].T)[0, 0]
    assert exact["masked"][0, 1] == -sympy.oo and exact["G_scaled"][0, 2] == 0


def test_symbols_and_lists_are_views_of_the_registry():
    assert latex.SYMBOLS == {
        "X": "X", "E": "E", "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V", "W_O": "W_O",
        "Q": "Q", "K": "K", "V": "V", "scores": "S", "scaled": "Z", "masked": r"\tilde{Z}", "A": "A", "O": "O",
        "G_O": "G_O", "G_A": "G_A", "G_V": "G_V", "G_scaled": "G_Z", "G_scores": "G_S", "G_Q": "G_Q",
        "G_K": "G_K", "G_W_Q": "G_{W_Q}", "G_W_K": "G_{W_K}", "G_W_V": "G_{W_V}", "G_X": "G_X",
        "G_X_V": r"G_X^{(V)}", "G_E": "G_E", "d_k": "d_k", "token_ids": "t",
        "M": "M", "H": "H", "T": "T", "pad": "p",
        "K_cache": r"K_{\mathrm{cache}}", "V_cache": r"V_{\mathrm{cache}}", "groups": "g",
        "pos": r"\mathrm{pos}", "theta": r"\theta", "perm": r"\mathrm{perm}",
        "tau": r"\tau", "cap": "c", "window": "w", "sinks": "s", "tile": r"\mathrm{tile}",
        "X_norm": r"\hat{X}", "Y": "Y", "gamma": r"\gamma", "beta": r"\beta",
        "phi_Q": r"\phi(Q)", "phi_K": r"\phi(K)", "KV": r"\mathrm{KV}", "z": "z",
        "latent": "C", "W_DKV": r"W_{DKV}", "m": "m", "l": r"\ell", "O_acc": "o",
        "slope": "m", "bias": "B", "A1": "A_{1}", "A2": "A_{2}", "a_tau1": r"a_{\tau_{1}}", "a_tau2": r"a_{\tau_{2}}",
        "a_tau3": r"a_{\tau_{3}}", "s_capped": r"\hat{s}", "a_capped": r"\hat{a}",
    }
    assert checkwork.FROM_X == ("X", "W_Q", "W_K", "W_V") and checkwork.FROM_QKV == ("Q", "K", "V")
    assert checkwork.FORWARD == ("Q", "K", "V", "scores", "scaled", "masked", "A", "O")
    assert checkwork.BACKWARD == ("G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K", "G_W_Q", "G_W_K", "G_W_V",
                                  "G_X")
    assert checkwork.NEEDS_X == ("G_W_Q", "G_W_K", "G_W_V", "G_X")
    assert set(solutions.PRODUCTS) == {"latent", "Q", "K", "V", "KV", "scores", "O", "G_A", "G_V", "G_Q", "G_K", "G_W_Q", "G_W_K",
                                       "G_W_V", "G_X_V"}
    assert solutions.SCALES == {"scaled": "scores", "G_scores": "G_scaled"}
    assert set(solutions.BUILDERS) == set(NAMES)
    assert sanity._checks_for("A") == [sanity._infinities, sanity._weights]
    assert sanity._checks_for("masked") == [sanity._infinities]
    assert sanity._checks_for("G_scores") == [sanity._infinities, sanity._softmax_gradient]


def test_formulas_render_in_katex_and_in_typst():
    import typst

    failures, summary = katex_errors([(s.name, s.formula_latex) for s in steps.STEPS])
    assert not failures and summary["checked"] == len(steps.STEPS)
    source = "\n\n".join(f"$ {s.typst_formula} $" for s in steps.STEPS)
    assert typst.compile(source.encode(), format="pdf").startswith(b"%PDF")
    # the LaTeX formula, set in Typst by the converter the answer keys use, compiles too
    converted = "\n\n".join(f"$ {latex_to_typst(s.formula_latex)} $" for s in steps.STEPS)
    assert typst.compile(converted.encode(), format="pdf").startswith(b"%PDF")


def test_the_mask_mistakes_keep_the_decoding_diagonal_of_a_rectangle():
    """2 queries, the last of 4 positions: the diagonal is at offset n_k − n_q = 2."""
    scaled = np.zeros((2, 4))
    given = {"scaled": scaled, "causal": True}
    right = pipeline.run(given)["masked"]
    assert np.array_equal(np.isneginf(right), [[False, False, False, True], [False, False, False, False]])
    hidden = {mid: np.isneginf(pipeline.run(given, mistakes={mid})["masked"])
              for mid in ("mask_diagonal", "mask_wrong_triangle")}
    assert np.array_equal(hidden["mask_diagonal"], [[False, False, True, True], [False, False, False, True]])
    assert np.array_equal(hidden["mask_wrong_triangle"], [[True, True, False, False], [True, True, True, False]])
    zeroed = pipeline.run(given, mistakes={"mask_after_softmax"})["A"]
    assert zeroed[0, 3] == 0 and np.all(zeroed[0, :3] == 0.25)  # the future zeroed, not renormalised


def test_the_new_records_change_nothing_without_their_given_values():
    """H, pad and T are read only when given: self-attention runs as before (the pins hold too)."""
    rng = np.random.default_rng(3)
    given = {"X": rng.integers(-2, 3, (3, 2)).astype(float), "W_Q": np.eye(2), "W_K": np.eye(2),
             "W_V": np.eye(2), "d_k": 2, "causal": True, "G_O": np.ones((3, 2))}
    env = pipeline.run(given)
    assert "M" not in env and np.array_equal(env["G_O"], given["G_O"])
    np.testing.assert_allclose(env["K"], given["X"])


def test_every_forward_mistake_on_a_stack_of_heads_gives_each_heads_own_values():
    """The records compute on stacks: one candidate's heads stacked (1, h, …) give, with each catalogued
    mistake, every value each head gives alone (a mistake's condition reads the matrix axes, the last two)."""
    rng = np.random.default_rng(3)
    for n, d_k, causal in ((2, 1, True), (3, 2, True), (3, 2, False)):
        X = rng.integers(-1, 3, (n, 2)).astype(float)  # (n, d)
        W = {w: rng.integers(-1, 2, (2, 2, d_k)).astype(float) for w in ("W_Q", "W_K", "W_V")}  # (h, d, d_k)
        stacked = {"X": X[None, None], **{w: v[None] for w, v in W.items()}, "d_k": d_k, "causal": causal}
        for mid in (None, *misconceptions.CATALOG):
            wrong = () if mid is None else {mid}
            together = pipeline.run(stacked, mistakes=wrong, until={"O"})
            for i in range(2):
                alone = pipeline.run({"X": X, **{w: v[i] for w, v in W.items()}, "d_k": d_k, "causal": causal},
                                     mistakes=wrong, until={"O"})
                for name in ("scores", "scaled", "masked", "A", "O"):
                    np.testing.assert_array_equal(together[name][0, i], alone[name],
                                                  err_msg=f"{mid}: {name}, n = {n}, d_k = {d_k}, head {i + 1}")


@pytest.mark.parametrize("stack", [(), (1,), (3, 2)])
def test_a_stack_makes_each_mistake_where_one_candidate_makes_it(stack):
    """The mistakes' conditions read the matrices' own axes, never a stack's: mask_zero_instead_of_inf is made
    by the mask step (n_q > 1), for a stack of one candidate as for a lone one."""
    given = self_attention_given(3, n=2)
    single = pipeline.run(given, mistakes={"mask_zero_instead_of_inf"})
    stacked = {k: (np.broadcast_to(v, (*stack, *np.shape(v))) if isinstance(v, np.ndarray) else v)
               for k, v in given.items()}
    env = pipeline.run(stacked, mistakes={"mask_zero_instead_of_inf"})
    assert env.made is None, f"stack {stack}: made per candidate at the softmax step"
    assert np.array_equal(env["A"], np.broadcast_to(single["A"], env["A"].shape)), f"stack {stack}"


def plain_run(given, mistakes=(), until=None, rounding=None):
    """pipeline.run as a walk over every step of the registry, each looked at in turn."""
    env = pipeline.Env(given, mistakes)
    env.rounding = rounding  # as pipeline.run: the steps write their rows and aids by it
    wanted = set(until) if until is not None else None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step in pipeline.STEPS:
            inputs = None if step.name in env else step.runs_on(env.keys())
            if inputs is None:
                continue
            env.current = step.name
            try:
                value = np.asarray(pipeline.compute_step(step, env), dtype=float)
            except ValueError:
                continue
            env[step.name] = value if rounding is None else numbers.round_half_up(value, rounding)
            if env.tainted and env.tainted.intersection(inputs):
                env.tainted.add(step.name)
            if wanted is not None and wanted <= env.keys():
                break
    return env


def same_env(a, b):
    assert list(a) == list(b)
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=True), name
            assert np.array_equal(np.signbit(x), np.signbit(y)), name  # bit for bit: −0.0 too
        else:
            assert x == y, name
    assert a.used == b.used and a.tainted == b.tainted


@pytest.mark.parametrize("kind_id", [k for k in exercises.KINDS if k not in ("concepts", "shapes")])
def test_the_planned_run_is_the_step_by_step_run(kind_id):
    for level in exercises.KINDS[kind_id].LEVELS:
        ex = exercises.generate(kind_id, 3, level)
        given = dict(ex.given)
        same_env(pipeline.run(given), plain_run(given))
        same_env(pipeline.run(given, rounding=2), plain_run(given, rounding=2))
        reference = dict(plain_run(given))
        for mid in misconceptions.CATALOG:
            until = set(ex.part_names)
            fast = pipeline.run_mistake(given, reference, mid, until=until)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                quiet = pipeline.run_mistake(given, reference, mid, until=until, ignoring_errors=True)
            start = {k: v for k, v in reference.items() if k not in pipeline.AFFECTED.get(mid, frozenset())}
            start.update(given)
            plain = plain_run(start, {mid}, until)
            same_env(fast, plain)
            same_env(quiet, plain)
            # stopped early only where the mistake is not made: then nothing it would have computed is named
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                made = pipeline.run_mistake(given, reference, mid, until=until, ignoring_errors=True,
                                            only_if_made=True)
            if plain.used:
                same_env(made, plain)
            else:
                assert not made.used and not made.tainted
        # a learner's own earlier values: a start the plan has not seen
        values = {p.name: p.reference + 0.5 for p in ex.parts if p.name in pipeline.STEP_BY_NAME}
        same_env(pipeline.run({**given, **values}, rounding=2), plain_run({**given, **values}, rounding=2))
