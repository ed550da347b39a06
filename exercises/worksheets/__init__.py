"""Printable worksheets and answer keys: PDF (through Typst), Markdown, LaTeX source and JSON.

A worksheet holds the problems only — no seeds, no answers. For per-student variants it holds one
sheet per student (a page break between them); the answer key lists every student's answers and
worked solutions: the steps of exercises.solve, the same the screen shows, in every format. The same
assignment gives byte-identical documents: no dates, Typst's own fonts only, everything in a fixed order.

    python -m exercises worksheet --kinds softmax,scores --level 2 --count 4 --seed 3 --format pdf --out DIR

By job: model (sheets, problems, solution steps), typst and typst_math (the PDF), text (Markdown and
LaTeX), files (JSON, writing files), command (the CLI subcommand).
"""

from .command import NAME, add_parser, run
from .files import MAX_EXERCISES, render, sheet_file, to_json, write, write_pdf_zip
from .model import (
    EXP_PLACES,
    FORMATS,
    MAX_CLASS_LIST_CHARS,
    MAX_STUDENTS,
    NAMES,
    SPACES,
    Given,
    Problem,
    Sheet,
    SolutionStep,
    Worksheet,
    answer_places,
    build,
    check_class_list,
    clean_students,
    example_cell,
    exp_rows,
    part_label,
    problem,
    read_students,
    single,
    solution_steps,
)
from .text import md_escape, problem_latex, tex_escape, to_latex, to_markdown
from .typst import (
    CJK_FONT_DIRS,
    CJK_FONT_ENV,
    MissingFont,
    cjk_font_dir,
    needs_cjk,
    to_pdf,
    to_typst,
    typst_matrix,
    typst_symbol,
)
from .typst_math import UnsupportedLatex, latex_to_typst, typst_string

__all__ = [
    "CJK_FONT_DIRS", "CJK_FONT_ENV", "EXP_PLACES", "FORMATS", "Given", "MAX_CLASS_LIST_CHARS", "MAX_EXERCISES",
    "MAX_STUDENTS", "MissingFont", "NAME", "NAMES", "Problem", "SPACES", "Sheet", "SolutionStep", "UnsupportedLatex",
    "Worksheet", "add_parser", "answer_places", "build", "check_class_list", "cjk_font_dir", "clean_students",
    "example_cell", "exp_rows", "latex_to_typst", "md_escape", "needs_cjk", "part_label", "problem", "problem_latex",
    "read_students", "render", "run", "sheet_file", "single", "solution_steps", "tex_escape", "to_json", "to_latex",
    "to_markdown", "to_pdf", "to_typst", "typst_matrix", "typst_string", "typst_symbol", "write", "write_pdf_zip",
]
