"""Worked solutions (DESIGN §7): every step from the given values to the parts, any cell explained.

    steps = solve(ex)              # [Step] in order, from what is given to what is asked
    step.display(exact=True)       # the step in LaTeX: formula, numbers substituted, result
    step.cell(i, j)                # CellDerivation: how that one cell is computed
    step.cell(i, j).substitutions  # its substituted lines as data (Substitution: shown Numbers, form, result)
    aids(ex)                       # eˣ table, √d_k, shapes of the given matrices

The numbers shown are the reference values the grader uses: a part's own reference, and for the
steps on the way ``pipeline.run(ex.given)``. Exact forms (``\\frac{1}{3}``, ``\\frac{\\sqrt{2}}{2}``,
``\\frac{e^{0}}{e^{0} + e^{1}}``) are worked out symbolically alongside and kept only where they agree
with those values.

A kind module may define its own ``solve(ex) -> list[Step]`` (and ``aids(ex) -> Aids``); ``solve``
then uses it. Such a kind builds its steps with ``pipeline_steps`` (the walk over the step registry,
for any given values and target names) and ``make_step`` (a step for any matrix with its formula and
a cell derivation), and its LaTeX with exercises.rendering.latex.

Rounding (DESIGN §4, "round what you write, then compute"): a line that substitutes rounded numbers
(an earlier value as a learner writes it) shows what those numbers give, half up to the step's
decimals, and, where that differs from the exact value's rounding, the exact value beside it in
brackets (``worked_chain``). The LaTeX of such a line is rendered from its Substitution record, so
tests/test_solution_arithmetic.py can recompute every line.

The package, by job: records (Step, CellDerivation), exact (exact arithmetic and agreement with the
references), context (what the builders read), builders (one per kind of registry step), walk
(solve and the pipeline walk), aids (eˣ table, √d_k, shapes, given values).
"""

from ..core.steps import G_X_PATHS, Product
from .aids import (
    Aids,
    ExpEntry,
    ExpSeries,
    Unit,
    aids,
    fixed_table,
    generic_aids,
    given_latex,
    shapes_of,
    shown_matrix,
    shown_vector,
)
from .builders import BUILDERS, BY_KIND
from .context import Context
from .exact import PRODUCTS, SCALES
from .records import (
    CellDerivation,
    Line,
    Matrix,
    Number,
    Step,
    Substitution,
    all_latex,
    make_step,
    number,
    result_chain,
    worked_chain,
)
from .walk import (
    CACHE_SIZE,
    _solved,
    build_context,
    exercise_context,
    generic_solve,
    pipeline_steps,
    solution,
    solve,
)

__all__ = [
    "Aids", "BUILDERS", "BY_KIND", "CACHE_SIZE", "CellDerivation", "Context", "ExpEntry", "ExpSeries", "Unit",
    "G_X_PATHS", "Line",
    "Matrix", "Number", "PRODUCTS", "Product", "SCALES", "Step", "Substitution", "aids", "all_latex",
    "build_context", "exercise_context", "fixed_table",
    "generic_aids", "generic_solve", "given_latex", "make_step", "pipeline_steps", "result_chain", "shapes_of",
    "shown_matrix", "shown_vector",
    "solution", "solve", "_solved", "number", "worked_chain",
]
