"""Exercises on attention: generate, grade, explain. See DESIGN §3.2 for the contract."""

from .checkwork import Report, StepCheck, check_work
from .engine import KINDS, generate, rng_for, validate
from .grading import Feedback, PartFeedback, grade
from .i18n import Msg, t
from .model import Exercise, Part
from .parser import AnswerError, parse_answer, parse_number
from .solutions import Aids, CellDerivation, Step, aids, solve

__all__ = [
    "KINDS", "AnswerError", "Exercise", "Feedback", "Msg", "Part", "PartFeedback",
    "generate", "grade", "parse_answer", "parse_number", "rng_for", "t", "validate",
    "Aids", "CellDerivation", "Step", "aids", "solve",
    "Report", "StepCheck", "check_work",
]
