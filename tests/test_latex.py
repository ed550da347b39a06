"""Exact-string tests of the one LaTeX builder: the key renderings are pinned."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

from exercises.rendering import latex as L


@pytest.mark.parametrize("x, places, expected", [
    (1 / 3, 2, "0.33"), (2 / 3, 3, "0.667"), (-0.001, 2, "0.00"), (3.0, 0, "3"), (-2.0, 0, "-2"),
    (-math.inf, 2, r"-\infty"), (math.inf, 0, r"\infty"), (math.nan, 2, r"\mathrm{NaN}"), (0.5, 2, "0.50"),
])
def test_decimal(x, places, expected):
    assert L.decimal(x, places) == expected


@pytest.mark.parametrize("x, expected", [
    (1 / 3, r"\frac{1}{3}"), (-0.5, r"- \frac{1}{2}"), (2.0, "2"), (-math.inf, r"-\infty"), (0.0, "0"),
    (0.707, "0.707"), (1.25, r"\frac{5}{4}"), (0.123456789, "0.123457"),
])
def test_given_numbers_are_exact(x, expected):
    assert L.number(x) == expected


@pytest.mark.parametrize("expr, expected", [
    (sympy.sqrt(2) / 2, r"\frac{\sqrt{2}}{2}"), (1 / sympy.sqrt(2), r"\frac{\sqrt{2}}{2}"),
    (3 * sympy.sqrt(2) / 4, r"\frac{3 \sqrt{2}}{4}"), (-sympy.sqrt(2), r"- \sqrt{2}"),
    (sympy.Rational(-1, 3), r"- \frac{1}{3}"), (-sympy.oo, r"-\infty"), (sympy.exp(sympy.Rational(1, 2)), r"e^{\frac{1}{2}}"),
])
def test_fixed_printer(expr, expected):
    assert L.sym(expr) == expected


def test_short_exact_forms():
    assert L.short(sympy.Rational(7, 4)) == r"\frac{7}{4}"
    assert L.short(sympy.Integer(3)) == "3"
    assert L.short(sympy.sqrt(8)) == r"2 \sqrt{2}"
    assert L.short(sympy.exp(1)) is None  # e^x forms are written by the softmax step itself
    assert L.short(None) is None
    assert L.short(sympy.Rational(707, 1000)) == "0.707"  # a typed decimal stays a decimal
    assert L.short(sum(sympy.sqrt(p) / q for p, q in [(2, 3), (3, 7), (5, 11), (7, 13)])) is None


def test_to_exact():
    assert L.to_exact(0.5) == sympy.Rational(1, 2)
    assert L.to_exact(-math.inf) == -sympy.oo
    assert L.to_exact(0.707) == sympy.Rational(707, 1000)
    assert L.to_exact(math.pi) is None
    assert L.to_exact(math.nan) is None


def test_square_roots():
    assert L.sqrt_dk(4) == r"\sqrt{4} = 2"
    assert L.sqrt_dk(2) == r"\sqrt{2}"
    assert L.sqrt_dk(64) == r"\sqrt{64} = 8"


def test_matrices():
    assert L.bmatrix([["1", "2"], ["3", "4"]]) == r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}"
    M = np.array([[1.0, 1 / 3], [-np.inf, 0.5]])
    assert L.matrix_exact(M) == \
        r"\begin{bmatrix} 1 & \displaystyle \frac{1}{3} \\ -\infty & \displaystyle \frac{1}{2} \end{bmatrix}"
    assert L.matrix(M, 2) == r"\begin{bmatrix} 1.00 & 0.33 \\ -\infty & 0.50 \end{bmatrix}"
    assert L.in_space("X", (3, 2)) == r"X \in \mathbb{R}^{3 \times 2}"


def test_notation():
    assert L.symbol("scores") == "S"
    assert L.symbol("masked") == r"\tilde{Z}"
    assert L.symbol("G_W_Q") == "G_{W_Q}"
    assert L.symbol("W_Q1") == "W_{Q1}"
    assert L.symbol("Q", tag="2") == "Q^{(2)}"
    assert L.symbol("X", tag="2") == "X", "the input is shared by every head"
    assert L.cell("A^{(1)}", 1, 0) == "A^{(1)}_{21}"
    assert L.cell("W_Q^{(1)}", 1, 0) == "(W_Q^{(1)})_{21}"
    assert L.cell("S", 1, 2) == "S_{23}"
    assert L.cell("G_A", 0, 0) == "(G_A)_{11}"
    assert L.cell("S", 9, 0) == "S_{10,1}"
    assert L.cell(r"\tilde{Z}", 0, 2) == r"\tilde{Z}_{13}"
    assert L.entry("A", "2k") == "A_{2k}"
    assert L.row_vector("Q", 1) == "q_{2}"
    assert L.row_vector("Q^{(1)}", 0) == "q^{(1)}_{1}"
    assert L.transposed("K") == r"K^{\top}"
    assert L.transposed("K^{(1)}") == r"(K^{(1)})^{\top}"


def test_unevaluated_step_lines():
    assert L.product("0", "1") == r"0 \cdot 1"
    assert L.product("-1", "2") == r"(-1) \cdot 2"
    assert L.product(r"- \frac{1}{3}", "2") == r"\left(- \frac{1}{3}\right) \cdot 2"
    assert L.total([L.product("0", "1"), L.product("1", "1")]) == r"0 \cdot 1 + 1 \cdot 1"
    assert L.total([]) == "0"
    assert L.chain("S_{23}", r"q_{2} \cdot k_{3}", r"0 \cdot 1 + 1 \cdot 1", "1") == \
        r"S_{23} = q_{2} \cdot k_{3} = 0 \cdot 1 + 1 \cdot 1 = 1"
    assert L.chain("A_{21}", (L.APPROX, "0.33")) == r"A_{21} \approx 0.33"
    assert L.aligned([("S", "=", "Q K^{\\top}"), ("", "=", "1")]) == \
        r"\begin{aligned} S &= Q K^{\top} \\  &= 1 \end{aligned}"
    assert L.frac(L.exp_of("0"), "e^{0} + e^{1}") == r"\frac{e^{0}}{e^{0} + e^{1}}"


def test_exact_decimal_check():
    assert L.is_exact_decimal("0.50", 0.5)
    assert not L.is_exact_decimal("0.33", 1 / 3)
    assert not L.is_exact_decimal(r"\frac{1}{3}", 1 / 3)
    assert L.is_exact_decimal(r"-\infty", -math.inf)
