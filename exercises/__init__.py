"""Exercises on attention: generate, grade, explain. See DESIGN §3.2 for the contract."""

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
