"""The answer parser (DESIGN §4): every accepted form, every rejection says what and where, caps, safety."""

from __future__ import annotations

import builtins
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exercises import AnswerError, parse_answer, parse_number
from exercises import parser as P
from exercises.selftest import format_cell

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
    assert "Row 2" in str(err.value) and "2 entries" in str(err.value) and "3" in str(err.value)
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
    from exercises.selftest import as_text

    M = np.round(np.random.default_rng(seed).normal(scale=3, size=(rows, cols)), 4)  # (rows, cols)
    M[0, 0] = -math.inf
    np.testing.assert_allclose(parse_answer(as_text(M)), M, atol=5e-7)
