"""The answer parser (DESIGN §4): every accepted form, every rejection says what and where, caps, safety."""

from __future__ import annotations

import builtins
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import exercises
from exercises import AnswerError, parse_answer, parse_number
from exercises.cli.selftest import format_cell
from exercises.core import parser
from exercises.core import parser as P

E = math.e


# ---------------------------------------------------------------- accepted cells

ACCEPTED_CELLS = [
    ("3", 3.0),
    ("-2", -2.0),
    ("0.33", 0.33),
    (".5", 0.5),
    ("-.5", -0.5),
    ("-1e-2", -0.01),
    ("2.5E1", 25.0),
    ("1/3", 1 / 3),
    ("-3/4", -0.75),
    ("e^2/(1+e^2)", E**2 / (1 + E**2)),
    ("e**2/(1+e**2)", E**2 / (1 + E**2)),
    ("exp(1)", E),
    ("exp(2)/(exp(0)+exp(1)+exp(2))", E**2 / (1 + E + E**2)),
    ("sqrt(2)/2", math.sqrt(2) / 2),
    ("1/sqrt(4)", 0.5),
    ("2*0.5", 1.0),
    ("2 * 0.5", 1.0),
    ("(1+2)*3", 9.0),
    ("2^3^2", 512.0),  # right-associative
    ("-2^2", -4.0),  # the sign applies after the power
    ("e^-1", 1 / E),
    ("2e", 2 * E),  # implicit product with a name
    ("2sqrt(2)", 2 * math.sqrt(2)),
    ("ln(e)", 1.0),
    ("pi", math.pi),
    ("-inf", -math.inf),
    ("−∞", -math.inf),  # unicode minus and the infinity sign
    ("-∞", -math.inf),
    ("−1", -1.0),  # U+2212
    ("–1", -1.0),  # en dash
    ("2×3", 6.0),
    ("2·3", 6.0),
    ("6÷4", 1.5),
    ("１２", 12.0),  # full-width digits
    ("－１．５", -1.5),  # full-width minus, digits and point
    ("0,5", 0.5),  # a decimal comma in a lone number
    ("-0,25", -0.25),
    ("√2/2", math.sqrt(2) / 2),
    ("√(2)", math.sqrt(2)),
    ("2²", 4.0),  # superscript exponent
    ("e⁻¹", 1 / E),
    ("  7  ", 7.0),
    ("1e12", 1e12),  # the magnitude cap itself is allowed
    ("1e-400", 0.0),  # underflow is harmless
]


@pytest.mark.parametrize("text, expected", ACCEPTED_CELLS)
def test_accepted_cell(text, expected):
    value = parse_number(text)
    if math.isinf(expected):
        assert value == expected
    else:
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("text, expected", ACCEPTED_CELLS)
def test_accepted_cell_as_a_whole_answer_is_1x1(text, expected):
    value = parse_answer(text)
    assert value.shape == (1, 1)
    assert value[0, 0] == pytest.approx(expected, rel=1e-12, abs=1e-15) or value[0, 0] == expected


# ---------------------------------------------------------------- accepted matrices

M22 = [[1.0, 2.0], [3.0, 4.0]]
ACCEPTED_MATRICES = [
    ("[[1, 2], [3, 4]]", M22),
    ("[[1,2],[3,4]]", M22),
    ("[1 2; 3 4]", M22),
    ("1 2; 3 4", M22),
    ("1, 2; 3, 4", M22),
    ("1 2\n3 4", M22),
    ("1, 2\n3, 4", M22),
    ("  1 2 \n\n 3 4 \n", M22),  # blank lines and stray spaces
    ("1 2\r\n3 4", M22),
    ("[1, 2, 3]", [[1.0, 2.0, 3.0]]),
    ("1\n2", [[1.0], [2.0]]),
    ("1 -1", [[1.0, -1.0]]),  # a sign glued to a number starts a new cell
    ("1 - 1", [[0.0]]),  # spaced operators join one cell
    ("e^2 / 3 1", [[E**2 / 3, 1.0]]),
    ("exp( 1 ) 2", [[E, 2.0]]),
    ("−1 −2; 3 4", [[-1.0, -2.0], [3.0, 4.0]]),
    ("[[−∞, 1], [0.5, -inf]]", [[-math.inf, 1.0], [0.5, -math.inf]]),
    ("1/3 2/3; 1 0", [[1 / 3, 2 / 3], [1.0, 0.0]]),
    ("√2 √3", [[math.sqrt(2), math.sqrt(3)]]),
    ("１ ２; ３ ４", M22),
]


@pytest.mark.parametrize("text, expected", ACCEPTED_MATRICES)
def test_accepted_matrix(text, expected):
    np.testing.assert_allclose(parse_answer(text), expected, rtol=1e-12)


def test_parsed_matrix_is_a_float_array():
    value = parse_answer("1 2; 3 4")
    assert value.dtype == float and value.ndim == 2


# ---------------------------------------------------------------- rejections say what and where


def test_unknown_name_in_a_matrix_names_row_column_and_character():
    with pytest.raises(AnswerError) as err:
        parse_answer("1 2; 3 x")
    e = err.value
    assert (e.row, e.col, e.pos) == (2, 2, 1)
    text = str(e)
    assert "Row 2, column 2" in text and "'x'" in text and "character 1" in text


def test_bad_character_names_row_column_character_and_position():
    with pytest.raises(AnswerError) as err:
        parse_answer("1 2\n3 4+$")
    e = err.value
    assert (e.row, e.col, e.pos) == (2, 2, 3)
    assert "Row 2, column 2" in str(e) and "'$'" in str(e) and "character 3" in str(e)


def test_lone_cell_error_names_the_character():
    with pytest.raises(AnswerError) as err:
        parse_number("1 + 2 ? 3")
    assert err.value.pos == 7 and "'?'" in str(err.value) and "character 7" in str(err.value)


@pytest.mark.parametrize("text, words", [
    ("", ["empty"]),
    ("   ", ["empty"]),
    ("2**", ["missing", "'**'"]),
    ("(1+2", ["never closed", "character 1"]),
    ("1+2)", ["')'", "character 4"]),
    ("abc", ["unknown name", "'abc'"]),
    ("nan", ["unknown name"]),
    ("sqrt 2", ["parentheses"]),
    ("1/0", ["does not give a number"]),
    ("sqrt(-1)", ["does not give a number"]),
    ("ln(0)", ["does not give a number"]),
    ("(-8)^(1/3)", ["does not give a number"]),
    ("0^-1", ["does not give a number"]),
    ("inf-inf", ["does not give a number"]),
    ("5 2", ["'2'", "character 3"]),  # two bare numbers are not a product
    ("3 1/2", ["'1'"]),  # nor a mixed number read as 3 × 1/2
    ("1..2", ["'.2'"]),
    ("e2", ["'2'"]),
    (".", ["'.'"]),
    ("1_000", ["'_'"]),
])
def test_rejected_cell_explains(text, words):
    with pytest.raises(AnswerError) as err:
        parse_number(text)
    for word in words:
        assert word in str(err.value), (text, str(err.value))


def test_ragged_rows_name_the_row_and_counts():
    with pytest.raises(AnswerError) as err:
        parse_answer("1 2 3; 4 5")
    assert err.value.row == 2
    assert "Row 2 holds 2 when row 1 holds 3" in str(err.value)  # the counts, with no "1 entries"
    with pytest.raises(AnswerError, match="Row 2"):
        parse_answer("[[1, 2], [3]]")


@pytest.mark.parametrize("text", ["[[1, 2], [3, 4]", "[[[1]]]", "[1, 2]]"])
def test_unbalanced_brackets_name_the_character(text):
    with pytest.raises(AnswerError) as err:
        parse_answer(text)
    assert "brackets" in str(err.value) and err.value.pos is not None
    assert f"character {err.value.pos}" in str(err.value)


def test_grid_reports_every_bad_cell_by_position():
    values, errors = P.parse_grid([["1", "x"], ["", "2/4"]], "A")
    assert set(errors) == {(0, 1), (1, 0)}
    assert "A, row 1, column 2" in str(errors[(0, 1)].message) and "'x'" in str(errors[(0, 1)].message)
    assert "row 2, column 1" in str(errors[(1, 0)].message) and "empty" in str(errors[(1, 0)].message)
    assert (errors[(0, 1)].row, errors[(0, 1)].col) == (1, 2)
    assert values[0, 0] == 1.0 and values[1, 1] == 0.5
    assert np.isnan(values[0, 1]) and np.isnan(values[1, 0])


def test_grid_with_a_short_row_reports_the_missing_cells():
    values, errors = P.parse_grid([["1", "2"], ["3"]])
    assert set(errors) == {(1, 1)} and "empty" in str(errors[(1, 1)].message)
    assert values.shape == (2, 2)


def test_grid_without_a_label_still_names_row_and_column():
    _, errors = P.parse_grid([["1", "2"], ["3", "?"]])
    assert "Row 2, column 2" in str(errors[(1, 1)].message)


def test_answer_error_is_a_value_error_with_a_catalog_message():
    with pytest.raises(ValueError) as err:
        parse_number("x")
    assert isinstance(err.value, AnswerError)
    assert err.value.message.key == "parse.unknown_name"
    assert str(err.value) == str(err.value.message)


# ---------------------------------------------------------------- caps


def test_cell_length_cap():
    parse_number("1" + " " * (P.MAX_CELL_CHARS - 1))
    with pytest.raises(AnswerError, match="characters long"):
        parse_number("1" * (P.MAX_CELL_CHARS + 1))


def test_matrix_length_cap():
    with pytest.raises(AnswerError, match="characters long"):
        parse_answer("1 " * (P.MAX_MATRIX_CHARS // 2 + 1))


def test_cell_count_cap():
    parse_answer("1 " * P.MAX_CELLS)
    with pytest.raises(AnswerError):
        parse_answer("1 " * (P.MAX_CELLS + 1))


def test_depth_cap_on_parentheses_and_signs():
    assert parse_number("(" * P.MAX_DEPTH + "1" + ")" * P.MAX_DEPTH) == 1.0
    with pytest.raises(AnswerError, match="nested"):
        parse_number("(" * (P.MAX_DEPTH + 1) + "1" + ")" * (P.MAX_DEPTH + 1))
    with pytest.raises(AnswerError, match="nested"):
        parse_number("-" * (P.MAX_DEPTH + 1) + "1")
    with pytest.raises(AnswerError, match="nested"):
        parse_number("exp(" * (P.MAX_DEPTH + 1) + "0" + ")" * (P.MAX_DEPTH + 1))


@pytest.mark.parametrize("text", [
    "1e13", "-1e13", "1e400", "10^13", "2^2^2^2^2^2", "9^9^9", "e^1000", "exp(1000)", "exp(exp(10))",
    "1e300*1e300", "-1e300*1e300", "-(1e200)^2", "1e13/10", "1e12+1e12",
])
def test_magnitude_cap(text):
    with pytest.raises(AnswerError, match="too large"):
        parse_number(text)


def test_overflow_never_passes_for_a_masked_score():
    """Only a typed infinity reads as −∞: an overflowing product must not sneak in as a masked cell."""
    for text in ["-1e300*1e300", "-(10^200)*10^200", "-exp(800)"]:
        with pytest.raises(AnswerError):
            parse_number(text)
    assert parse_number("-inf") == -math.inf and parse_number("inf") == math.inf


# ---------------------------------------------------------------- safety

HOSTILE = [
    "__import__('os')",
    "__import__('os').system('touch /tmp/attention_pwned')",
    "os.system('touch /tmp/attention_pwned')",
    "().__class__",
    "().__class__.__bases__[0].__subclasses__()",
    "eval('1')",
    "exec('x=1')",
    "open('/etc/passwd')",
    "lambda: 1",
    "globals()",
    "print(1)",
    "abs(-1)",
    "pow(2, 3)",
    "math.pi",
    "np.exp(1)",
    "1 if 1 else 2",
    "[x for x in (1,)]",
    "{}",
    "'1'",
    "1;import os",
    "\\x41",
    "$(ls)",
    "`ls`",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_is_only_ever_a_format_error(text):
    with pytest.raises(AnswerError):
        parse_number(text)
    with pytest.raises(AnswerError):
        parse_answer(text)
    assert not Path("/tmp/attention_pwned").exists()


def test_parser_never_calls_eval_exec_import_or_sympify():
    """Spy on every door to evaluation while parsing; all are restored before pytest runs on."""
    import sympy
    import sympy.parsing.sympy_parser as sp

    calls: list[str] = []

    def spy(name, real):
        def call(*args, **kwargs):
            calls.append(f"import {args[0]}" if name == "__import__" else name)
            return real(*args, **kwargs)
        return call

    doors = [(builtins, name) for name in ("eval", "exec", "compile", "__import__")]
    doors += [(sympy, "sympify"), (sp, "parse_expr")]
    originals = [(owner, name, getattr(owner, name)) for owner, name in doors]
    outcomes = []
    for owner, name, real in originals:
        setattr(owner, name, spy(name, real))
    try:
        for text, _ in ACCEPTED_CELLS:
            outcomes.append(parse_number(text))
        for text, _ in ACCEPTED_MATRICES:
            outcomes.append(parse_answer(text))
        for text in HOSTILE:
            try:
                parse_answer(text)
                outcomes.append(text)  # accepted: wrong
            except AnswerError:
                pass
    finally:
        for owner, name, real in originals:
            setattr(owner, name, real)
    assert set(calls) <= {"import re"}  # the re module imports its own template helper; nothing else
    assert len(outcomes) == len(ACCEPTED_CELLS) + len(ACCEPTED_MATRICES)


GRAMMAR_CHARS = "0123456789.eE+-*/^()[];, \n\t−∞√·×πinfxsqrtplog_'\"`{}"


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.text(max_size=200), st.text(alphabet=GRAMMAR_CHARS, max_size=200)))
def test_arbitrary_text_raises_nothing_but_answer_error(text):
    for parse in (parse_number, parse_answer):
        try:
            value = parse(text)
        except AnswerError:
            continue
        value = np.asarray(value, dtype=float)
        assert not np.isnan(value).any()
        finite = value[np.isfinite(value)]
        assert np.all(np.abs(finite) <= P.MAX_MAGNITUDE)


@settings(max_examples=200, deadline=None)
@given(cells=st.lists(st.lists(st.one_of(st.none(), st.text(max_size=30)), min_size=1, max_size=4),
                      min_size=1, max_size=4))
def test_grid_of_arbitrary_text_never_raises(cells):
    values, errors = P.parse_grid(cells, "A")
    for (r, c), err in errors.items():
        assert isinstance(err, AnswerError)
        assert np.isnan(values[r, c])
        assert (err.row, err.col) == (r + 1, c + 1)


# ---------------------------------------------------------------- round trip with format_cell


@settings(max_examples=500, deadline=None)
@given(x=st.one_of(st.floats(-P.MAX_MAGNITUDE, P.MAX_MAGNITUDE, allow_nan=False, allow_infinity=False),
                   st.integers(-10**6, 10**6).map(float), st.just(-math.inf)))
def test_format_cell_round_trips(x):
    text = format_cell(x)
    back = parse_number(text)
    if math.isinf(x):
        assert back == x and text == "-inf"
    else:
        assert abs(back - x) <= 5e-7 + 1e-15 * abs(x)


@settings(max_examples=100, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_pasted_matrix_text_round_trips(rows, cols, seed):
    from exercises.cli.selftest import as_text

    M = np.round(np.random.default_rng(seed).normal(scale=3, size=(rows, cols)), 4)  # (rows, cols)
    M[0, 0] = -math.inf
    np.testing.assert_allclose(parse_answer(as_text(M)), M, atol=5e-7)


# ---------------------------------------------------------------- 2e+1 beside the constant e


def rejection(text: str, parse=parse_number) -> AnswerError:
    with pytest.raises(AnswerError) as err:
        parse(text)
    return err.value


@pytest.mark.parametrize("text, token, pos, product, value, power", [
    ("e/(2e+1)", "2e+1", 4, "2*e+1", "20", "2×10¹"),
    ("e/(2E+1)", "2E+1", 4, "2*e+1", "20", "2×10¹"),
    ("E/(2e+1)", "2e+1", 4, "2*e+1", "20", "2×10¹"),  # E is the constant too
    ("e^2/(1+3e-2)", "3e-2", 8, "3*e-2", "0.03", "3×10⁻²"),
    ("2e+1 - e", "2e+1", 1, "2*e+1", "20", "2×10¹"),
    ("e*1.5E-03", "1.5E-03", 3, "1.5*e-03", "0.0015", "1.5×10⁻³"),
    ("exp(1)*e/(2e+11)", "2e+11", 11, "2*e+11", "200000000000", "2×10¹¹"),
])
def test_signed_power_of_ten_beside_the_constant_e_is_refused(text, token, pos, product, value, power):
    err = rejection(text)
    assert err.message.key == "parse.ambiguous_e" and err.pos == pos
    assert err.message.params == {"where": err.message.params["where"], "token": token, "pos": pos,
                                  "product": product, "value": value, "power": power}
    en = str(err)
    assert f"'{token}' at character {pos}" in en and f"write {product} for {token}, or {value} for {power}" in en
    zh = err.message.render("zh")
    assert token in zh and product in zh and value in zh and power in zh and zh != en


def test_the_ambiguous_e_message_names_row_and_column_in_a_matrix():
    err = rejection("1 e/(2e+1); 0 1", parse_answer)
    assert (err.row, err.col, err.pos) == (1, 2, 4)
    assert str(err).startswith("Row 1, column 2: '2e+1' at character 4")


@pytest.mark.parametrize("text, expected", [
    ("2e+1", 20.0), ("2E+1", 20.0), ("-1e-2", -0.01), ("1.5e3", 1500.0), ("3e-2", 0.03), ("+2e+01", 20.0),
    ("2e+1 + 1", 21.0), ("1e-2*pi", 0.01 * math.pi), ("exp(1)/(2e+1)", E / 20),  # exp is not the constant
    ("e/(2e + 1)", E / (2 * E + 1)), ("e/(2*e+1)", E / (2 * E + 1)), ("e/(2e1)", E / 20),  # unsigned: 20 only
])
def test_a_power_of_ten_without_the_constant_e_stays_a_number(text, expected):
    assert parse_number(text) == pytest.approx(expected, rel=1e-12)


def test_an_oversized_power_of_ten_beside_e_is_too_large_rather_than_ambiguous():
    assert rejection("e*2e+400").message.key == "parse.too_large"


SIGNED_POWERS = st.builds(lambda m, sign, k: f"{m}e{sign}{k}",
                          st.sampled_from(["1", "2", "3", "1.5", ".5", "2.", "12"]),
                          st.sampled_from("+-"), st.integers(0, 9))


@settings(max_examples=200, deadline=None)
@given(literal=SIGNED_POWERS, form=st.sampled_from(["e/({})", "e*{}", "{}+e", "(1+{})/e^2", "E-{}"]))
def test_every_signed_power_of_ten_beside_e_is_named(literal, form):
    err = rejection(form.format(literal))
    assert err.message.key == "parse.ambiguous_e" and err.message.params["token"] == literal
    assert parse_number(literal) == float(literal)  # on its own it is the number


NUMBER_TEXTS = st.floats(-P.MAX_MAGNITUDE, P.MAX_MAGNITUDE, allow_nan=False, allow_infinity=False).flatmap(
    lambda x: st.sampled_from([repr(x), f"{x:.6f}", f"{x:g}", f"{x:e}", str(x)]))
NO_E_ATOMS = st.one_of(NUMBER_TEXTS, st.sampled_from(["2e+1", "3e-2", "1E+5", "pi", "sqrt(2)", "exp(1)",
                                                      "ln(2)", "(1+2)", "inf", "-oo"]))


@settings(max_examples=500, deadline=None)
@given(text=NUMBER_TEXTS)
def test_a_printed_number_parses_to_itself(text):
    assert parse_number(text) == float(text)
    assert parse_answer(text)[0, 0] == float(text)


@settings(max_examples=300, deadline=None)
@given(atoms=st.lists(NO_E_ATOMS, min_size=1, max_size=5), ops=st.lists(st.sampled_from(["+", "-", "*", "/", "^", " "]),
                                                                         min_size=4, max_size=4))
def test_an_expression_without_the_constant_e_is_never_called_ambiguous(atoms, ops):
    text = atoms[0] + "".join(op + atom for op, atom in zip(ops, atoms[1:]))
    try:
        parse_number(text)
    except AnswerError as err:
        assert err.message.key != "parse.ambiguous_e", text


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=GRAMMAR_CHARS.replace("e", "").replace("E", ""), max_size=60))
def test_text_without_the_letter_e_is_never_called_ambiguous(text):
    for parse in (parse_number, parse_answer):
        try:
            parse(text)
        except AnswerError as err:
            assert err.message.key != "parse.ambiguous_e", text


# ---------------------------------------------------------------- minus infinity, every spelling


MINUS_INFINITY = ["-inf", "-Inf", "-INF", "−∞", "-∞", "− ∞", "-oo", "-OO", "-infinity", "-Infinity",
                  "-INFINITY", "−inf", "−oo", "-(inf)", "－∞"]


@pytest.mark.parametrize("text", MINUS_INFINITY)
def test_every_spelling_of_minus_infinity_reads_as_minus_infinity(text):
    assert parse_number(text) == -math.inf
    assert parse_answer(text)[0, 0] == -math.inf
    assert parse_answer(f"[[{text}, 1], [0.5, {text}]]").tolist() == [[-math.inf, 1.0], [0.5, -math.inf]]
    values, errors = P.parse_grid([[text, "1"]], "A")
    assert not errors and values[0, 0] == -math.inf


@pytest.mark.parametrize("text", ["inf", "oo", "Infinity", "∞"])
def test_plus_infinity_reads_as_plus_infinity(text):
    assert parse_number(text) == math.inf


# ---------------------------------------------------------------- a decimal comma inside a matrix


@pytest.mark.parametrize("text, row, col, cell, fixed", [
    ("0,5 0,25; 1 0", 1, 1, "0,5", "0.5"),
    ("0,33, 0,67", 1, 1, "0,33", "0.33"),
    ("[[0,5, 0,5], [1, 0]]", 1, 1, "0,5", "0.5"),
    ("1 2; 3 0,5", 2, 2, "0,5", "0.5"),
    ("1, 0,5\n0, 1", 1, 2, "0,5", "0.5"),
    ("1 0\n0,25 0,75", 2, 1, "0,25", "0.25"),
    ("−0,5 1", 1, 1, "-0,5", "-0.5"),
])
def test_a_decimal_comma_in_a_matrix_row_says_use_a_dot(text, row, col, cell, fixed):
    err = rejection(text, parse_answer)
    assert err.message.key == "parse.decimal_comma" and (err.row, err.col) == (row, col)
    en = str(err)
    assert en == (f"Row {row}, column {col}: '{cell}' has a decimal comma: use a dot for decimals ({fixed}); "
                  "commas and spaces separate the entries.")
    zh = err.message.render("zh")
    assert f"第 {row} 行第 {col} 列" in zh and cell in zh and fixed in zh


@pytest.mark.parametrize("text, pos", [("1,5+1", 2), ("e^0,5", 4), (" 2*0,5", 5)])
def test_a_decimal_comma_inside_one_cell_expression_says_use_a_dot(text, pos):
    err = rejection(text)
    assert err.message.key == "parse.decimal_comma" and err.pos == pos
    assert "use a dot for decimals" in str(err)


@pytest.mark.parametrize("text, expected", [
    ("0,5", [[0.5]]), ("-0,25", [[-0.25]]), (" 1,5 ", [[1.5]]),  # a lone number: normalised (DESIGN §4)
    ("1,2; 3,4", M22), ("[[1,2],[3,4]]", M22), ("1, 2; 3, 4", M22),  # commas between entries, as always
])
def test_commas_that_are_not_decimal_commas_read_as_before(text, expected):
    np.testing.assert_allclose(parse_answer(text), expected)


@settings(max_examples=100, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(2, 4), sep=st.sampled_from([" ", ", ", "  "]),
       seed=st.integers(0, 2**32 - 1))
def test_a_matrix_typed_with_decimal_commas_names_its_first_comma_cell(rows, cols, sep, seed):
    M = np.round(np.random.default_rng(seed).normal(scale=3, size=(rows, cols)), 2)  # (rows, cols)
    texts = [[f"{x:.2f}" for x in row] for row in M]
    np.testing.assert_allclose(parse_answer("\n".join(sep.join(r) for r in texts)), M)  # with dots: read
    err = rejection("\n".join(sep.join(t.replace(".", ",") for t in r) for r in texts), parse_answer)
    assert err.message.key == "parse.decimal_comma" and (err.row, err.col) == (1, 1)
    assert err.message.params["fixed"] == texts[0][0]


def test_the_plain_decimal_fast_path_reads_as_the_grammar_does():
    """parse_number skips the grammar for a plain decimal: the same float,
    sign of zero included, and everything else still goes through the grammar and its messages."""
    import math
    import random

    from exercises.core import parser as P

    rng = random.Random(14)
    texts = ["0", "-0", "+5", "5.", ".5", "-.25", " 1.5\t", "007", "999999999999", "-123.456000"]
    texts += [f"{rng.choice(['', '-', '+'])}{rng.randint(0, 10**6)}.{rng.randint(0, 10**6):06d}" for _ in range(300)]
    for text in texts:
        assert P._PLAIN_DECIMAL.fullmatch(text), text
        grammar = P._Parser(P._tokenize(P.normalise(text, lone=True), None), None).parse()
        fast = P.parse_number(text)
        assert fast == grammar and math.copysign(1, fast) == math.copysign(1, grammar), text
    for text in ("1e3", "9999999999999", "1,5", "−1", "0.5.5", "", "1 2"):
        assert not P._PLAIN_DECIMAL.fullmatch(text), text
    with pytest.raises(P.AnswerError):
        P.parse_number("9999999999999")  # 13 digits: the grammar's "too large"


# ---------------------------------------------------------------- a matrix pasted as LaTeX

LATEX_MATRICES = [
    (r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}", M22),
    (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", M22),
    (r"\begin{matrix} 1 & 2 \\ 3 & 4 \end{matrix}", M22),
    ("\\begin{bmatrix}\n  1 & 2 \\\\\n  3 & 4 \\\\\n\\end{bmatrix}\n", M22),  # line breaks, a trailing \\
    (r"$$\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}$$", M22),
    (r"\[ \left[ \begin{matrix} 1 & 2 \\ 3 & 4 \end{matrix} \right] \]", M22),
    (r"\begin{array}{cc} 1 & 2 \\[2pt] 3 & 4 \end{array}", M22),
    (r"\begin{bmatrix*}[r] 1 & 2 \\ 3 & 4 \end{bmatrix*}", M22),
    (r"1 & 2 \\ 3 & 4", M22),  # the inside of an environment alone
    (r"\begin{bmatrix} \frac{1}{3} & -\infty \\ \sqrt{2} & e^{-1} \end{bmatrix}",
     [[1 / 3, -math.inf], [math.sqrt(2), 1 / E]]),
    (r"\begin{pmatrix} \dfrac{e^{2}}{e^{0}+e^{1}+e^{2}} & 2\cdot 3 \\ \tfrac{-1}{2} & \frac{\sqrt{2}}{2} \end{pmatrix}",
     [[E**2 / (1 + E + E**2), 6.0], [-0.5, math.sqrt(2) / 2]]),
    (r"\begin{bmatrix} \mathrm{e}^{2} & \exp(1) \\ 2\times\pi & \ln{e} \end{bmatrix}",
     [[E**2, E], [2 * math.pi, 1.0]]),
    (r"\begin{bmatrix} -\infty & 0{,}5 \end{bmatrix}".replace("{,}", "."), [[-math.inf, 0.5]]),
    (r"\begin{bmatrix} 1 \\ -2 \\ \left( 3 \right) \end{bmatrix}", [[1.0], [-2.0], [3.0]]),
    (r"\begin{bmatrix} 2\sqrt{2} \, & \; 1\quad \end{bmatrix}", [[2 * math.sqrt(2), 1.0]]),
]


@pytest.mark.parametrize("text, expected", LATEX_MATRICES)
def test_a_latex_matrix_reads_as_its_entries(text, expected):
    np.testing.assert_allclose(parse_answer(text), expected, rtol=1e-12, err_msg=text)


HOSTILE_LATEX = [
    (r"\begin{bmatrix} \input{/etc/passwd} & 2 \end{bmatrix}", r"\input", (1, 1, 1)),
    (r"\begin{bmatrix} 1 & 2 \\ 3 & \include{x} \end{bmatrix}", r"\include", (2, 2, 1)),
    (r"\begin{bmatrix} 1 & \def\x{1}\x \end{bmatrix}", r"\def", (1, 2, 1)),
    (r"\begin{bmatrix} \newcommand{\x}{1} \end{bmatrix}", r"\newcommand", (1, 1, 1)),
    (r"\begin{bmatrix} 1 + \immediate\write18{rm -rf /} \end{bmatrix}", r"\immediate", (1, 1, 5)),
    (r"\begin{bmatrix} \csname x\endcsname \end{bmatrix}", r"\csname", (1, 1, 1)),
    (r"\begin{bmatrix} 2 & \catcode`\^=7 \end{bmatrix}", r"\catcode", (1, 2, 1)),
    (r"\begin{bmatrix} 2 & 1\hline \end{bmatrix}", r"\hline", (1, 2, 2)),
]


@pytest.mark.parametrize("text, command, where", HOSTILE_LATEX)
def test_a_latex_command_outside_the_whitelist_is_refused_by_name_row_column_and_character(text, command, where):
    err = rejection(text, parse_answer)
    assert err.message.key == "parse.latex_command" and (err.row, err.col, err.pos) == where, (text, str(err))
    row, col, pos = where
    assert f"Row {row}, column {col}" in str(err) and f"'{command}'" in str(err) and f"character {pos}" in str(err)
    assert f"第 {row} 行第 {col} 列" in err.message.render("zh") and command in err.message.render("zh")
    assert not Path("/tmp/attention_pwned").exists()


def test_deeply_nested_braces_are_refused_quickly():
    deep = r"\begin{bmatrix} " + "{" * 50 + "1" + "}" * 50 + r" \end{bmatrix}"
    err = rejection(deep, parse_answer)
    assert err.message.key == "parse.too_deep" and (err.row, err.col) == (1, 1), str(err)
    deeper = r"\begin{bmatrix} " + "{" * 2000 + "1" + "}" * 2000 + r" \end{bmatrix}"
    err = rejection(deeper, parse_answer)
    assert err.message.key == "parse.too_long" and (err.row, err.col) == (1, 1), str(err)
    inside_frac = r"\begin{bmatrix} " + r"\frac{" * 9 + "1" + "}{2}" * 9 + r" \end{bmatrix}"
    assert rejection(inside_frac, parse_answer).message.key == "parse.too_deep"
    unbalanced = r"\begin{bmatrix} 1 & " + "{" * 3000 + r" \end{bmatrix}"
    assert rejection(unbalanced, parse_answer).message.key == "parse.brackets"
    too_long = r"\begin{bmatrix} " + "{" * P.MAX_MATRIX_CHARS + r" \end{bmatrix}"
    assert rejection(too_long, parse_answer).message.key == "parse.too_long"


@pytest.mark.parametrize("cell", [r"10^{400}", r"10^{10^{10}}", r"\frac{1e400}{1}", r"\frac{10^{12}}{10^{-12}}",
                                  r"e^{e^{e^{e}}}", r"\sqrt{1e40}\cdot 1e40"])
def test_huge_numbers_in_a_latex_matrix_are_too_large(cell):
    err = rejection(r"\begin{bmatrix} 1 & " + cell + r" \end{bmatrix}", parse_answer)
    assert err.message.key == "parse.too_large" and (err.row, err.col) == (1, 2), (cell, str(err))


@pytest.mark.parametrize("text, key, pos, words", [
    (r"\begin{bmatrix} \frac12 & 2 \end{bmatrix}", "parse.latex_braces", 1, [r"'\frac'", "braces", "Row 1, column 1"]),
    (r"\begin{bmatrix} 1 & \sqrt2 \end{bmatrix}", "parse.latex_braces", 1, [r"'\sqrt'", "Row 1, column 2"]),
    (r"\begin{bmatrix} 1 & \frac{1}{0} \end{bmatrix}", "parse.undefined", 1, ["Row 1, column 2"]),
    (r"\begin{bmatrix} {1 + 2 & 3 \end{bmatrix}", "parse.brackets", None, ["brackets", "character"]),
    (r"\begin{bmatrix} 1 & (2 \end{bmatrix}", "parse.unclosed", 1, ["Row 1, column 2", "character 1"]),
    (r"\begin{vmatrix} 1 \end{vmatrix}", "parse.latex_environment", 1, [r"'\begin{vmatrix}'", "character 1"]),
    (r"\begin{bmatrix} 1 & 2", "parse.latex_unclosed", 1, [r"'\begin{bmatrix}'", r"\end", "character 1"]),
    (r"\begin{bmatrix} 1 \end{pmatrix}", "parse.latex_unclosed", 1, [r"'\begin{bmatrix}'"]),
    (r"A = \begin{bmatrix} 1 \end{bmatrix}", "parse.latex_outside", 1, ["'A ='", "character 1"]),
    (r"\begin{bmatrix} 1 \end{bmatrix} \begin{bmatrix} 2 \end{bmatrix}", "parse.latex_outside", 33, ["character 33"]),
    (r"\begin{bmatrix}\begin{bmatrix}1\end{bmatrix}\end{bmatrix}", "parse.latex_outside", 16, ["character 16"]),
    (r"\begin{bmatrix} 1 \end{bmatrix} \input{x}", "parse.latex_outside", 33, [r"'\input{x}'"]),
])
def test_a_latex_rejection_says_what_and_where(text, key, pos, words):
    err = rejection(text, parse_answer)
    assert err.message.key == key, (text, str(err))
    if pos is not None:
        assert err.pos == pos, (text, str(err))
    for word in words:
        assert word in str(err), (text, word, str(err))
    assert "{" + "where" not in err.message.render("zh")


def test_a_ragged_latex_matrix_names_the_row():
    err = rejection(r"\begin{bmatrix} 1 & 2 \\ 3 \end{bmatrix}", parse_answer)
    assert err.row == 2 and "Row 2 holds 1 when row 1 holds 2" in str(err)


def test_latex_is_read_without_eval_exec_or_sympify(monkeypatch):
    import sympy
    import sympy.parsing.sympy_parser as sp

    def refuse(*args, **kwargs):
        raise AssertionError("a door to evaluation was opened")

    for owner, name in [(builtins, "eval"), (builtins, "exec"), (builtins, "compile"), (sympy, "sympify"),
                        (sp, "parse_expr")]:
        monkeypatch.setattr(owner, name, refuse)
    for text, expected in LATEX_MATRICES:
        np.testing.assert_allclose(parse_answer(text), expected, rtol=1e-12)
    for text, _, _ in HOSTILE_LATEX:
        rejection(text, parse_answer)


LATEX_CHARS = r"0123456789.e+-*/^(){}&\ " + "\n" + "fracsqtinfybeglmdp[]$"


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.text(alphabet=LATEX_CHARS, max_size=200),
                      st.lists(st.sampled_from([r"\begin{bmatrix}", r"\end{bmatrix}", r"\frac", r"\sqrt", "{", "}",
                                                "&", r"\\", "1", "-", r"\infty", "e^", " ", r"\left(", r"\right)"]),
                               max_size=40).map("".join)))
def test_arbitrary_latex_raises_nothing_but_answer_error(text):
    try:
        value = parse_answer(text)
    except AnswerError:
        return
    finite = value[np.isfinite(value)]
    assert not np.isnan(value).any() and np.all(np.abs(finite) <= P.MAX_MAGNITUDE), text


def test_a_latex_matrix_grades_in_practice_and_check_my_work():
    """Wherever a matrix can be pasted: a part's answer text, and Check my work's boxes."""

    ex = exercises.generate("scores", seed=3, level=1)
    reference = ex.part("scores").reference
    latex = r"\begin{bmatrix} " + r" \\ ".join(" & ".join(format_cell(x) for x in row) for row in reference) + \
        r" \end{bmatrix}"
    assert exercises.grade(ex, {"scores": latex}).score == 1.0, ("scores", 1, 3, latex)
    report = exercises.check_work(
        {"X": r"\begin{bmatrix} 1 & 0 \\ 0 & 1 \\ 1 & 1 \end{bmatrix}", "W_Q": r"\begin{pmatrix}1&0\\0&1\end{pmatrix}",
         "W_K": r"\begin{matrix}1&0\\0&1\end{matrix}", "W_V": "1 0; 0 1"},
        {"scores": r"\begin{bmatrix} 1 & 0 & 1 \\ 0 & 1 & 1 \\ 1 & 1 & 2 \end{bmatrix}",
         "A": r"\begin{bmatrix} 1 & 0 & 0 \\ 0.33 & 0.67 & 0 \\ 0.25 & 0.25 & 0.5 \end{bmatrix}"}, causal=True)
    assert report.ok and report.first_error is None, [m.render() for m in report.summary()]


ALPHABET = list("0123456789") * 3 + list(".,,+-  \t\n\ninf") + ["inf", "-inf", ", ", "\n", ";", "[", "e", "1,5"]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, same values bit for bit (−0.0 is not 0.0; ∞ equals ∞)."""
    return a.shape == b.shape and bool(np.all((a == b) & (np.signbit(a) == np.signbit(b))))


def test_grid_cells_read_as_parse_number():
    rng = np.random.default_rng(7)
    for _ in range(300):
        grid = [["".join(rng.choice(ALPHABET, size=int(rng.integers(1, 6)))) for _ in range(3)] for _ in range(2)]
        values, errors = parser.parse_grid(grid, "X")
        for r, row in enumerate(grid):
            for c, text in enumerate(row):
                try:
                    expected = parser.parse_number(text)
                except AnswerError:
                    assert (r, c) in errors and np.isnan(values[r, c])
                    continue
                assert (r, c) not in errors and _same(values[r:r + 1, c:c + 1], np.array([[expected]]))
