"""Exercises on attention: generate, grade, explain. See DESIGN §3.2 for the contract."""

from threadpoolctl import threadpool_limits

from .core.checkwork import Report, StepCheck, check_work
from .core.engine import KINDS, generate, rng_for, validate
from .core.grading import Feedback, PartFeedback, grade
from .core.model import Exercise, Part
from .core.parser import AnswerError, parse_answer, parse_number
from .i18n import Msg, t
from .solutions import Aids, CellDerivation, Step, aids, solve

__all__ = [
    "KINDS", "AnswerError", "Exercise", "Feedback", "Msg", "Part", "PartFeedback",
    "generate", "grade", "parse_answer", "parse_number", "rng_for", "t", "validate",
    "Aids", "CellDerivation", "Step", "aids", "solve",
    "Report", "StepCheck", "check_work",
]

# One BLAS thread for the whole process (numpy has loaded BLAS by now). Every product here is small, a few
# cells to a few thousand, so BLAS's worker threads never speed one up; but after a product over OpenBLAS's
# threshold they spin on the other core for milliseconds, CPU that a server running one replica per core
# needs: 40 % of gqa's generate time was that thread's (bench/compare_engine.py counts every thread's CPU).
BLAS_THREADS = 1
threadpool_limits(BLAS_THREADS, user_api="blas")
