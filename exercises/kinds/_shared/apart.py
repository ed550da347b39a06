"""A variant's mistakes kept apart from what a careful student writes (issue 17's kinds).

The redraw (misconceptions.collisions) keeps every guarded mistake apart from the exact answer. Under
"round what you write, then compute" a later part is also right when it follows from the earlier
values rounded as written: a mistake one step up whose later value lands within rounding of that
is then graded right there, and the mistake goes unnamed. Such variants are drawn again too.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...core import misconceptions
from ...core.grading import declared_decimals
from ...core.model import Exercise
from .fast import apart_from


def apart_from_rounded(ex: Exercise, guards: Iterable[str], chain) -> bool:
    """No guarded mistake's value of a part is within the part's separation of that part as computed
    with every value rounded to the declared decimals (`chain`: the kind's chain(ex, values, rounding))."""
    careful = chain(ex, {}, declared_decimals(ex))
    return all(apart_from(careful[name], alts, misconceptions.separation(ex.part(name)))
               for name, alts in misconceptions.by_part(ex, guards).items() if name in careful)
