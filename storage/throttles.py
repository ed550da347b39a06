"""Wrong tries at the forms that accept a secret, counted in the database, so a new
websocket, another tab or another replica meets the same wait: per form and client address, and a
global budget per form (many addresses at once). The policy (free tries, waits, budget) is the
caller's (services.throttle); this module keeps the counts, one short transaction each.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .db import throttles, writing

EVERYONE = "*"  # the source of a form's global budget
FORGET_AFTER = timedelta(hours=1)  # a source quiet this long past its wait starts again from zero
TRIES = 3


def wait(engine: Engine, form: str, source: str, now: datetime) -> float:
    """Seconds before the next try at `form` from `source` is taken (0: go ahead); `now` naive UTC."""
    with engine.connect() as conn:
        until = conn.execute(sa.select(sa.func.max(throttles.c.until)).where(
            throttles.c.form == form, throttles.c.source.in_([source, EVERYONE]))).scalar()
    return 0.0 if until is None else max(0.0, (until - now).total_seconds())


def _row(conn: Connection, form: str, source: str, now: datetime):
    """The row of (form, source), locked for this transaction (created when missing)."""
    mine = sa.and_(throttles.c.form == form, throttles.c.source == source)
    row = conn.execute(sa.select(throttles).where(mine).with_for_update()).first()
    if row is None:
        conn.execute(sa.insert(throttles).values(form=form, source=source, failures=0, until=now, since=now))
        row = conn.execute(sa.select(throttles).where(mine).with_for_update()).first()
    return row


def failed(engine: Engine, form: str, source: str, attempt: str | None, now: datetime,
           delay: Callable[[int], float], budget: int, window_s: float) -> float:
    """Count a wrong try at `form` from `source` and return the wait it sets (the longer of the
    source's and the form's). The same attempt as the source's last one (a page rerun) counts once.
    When the form's global budget of wrong tries in `window_s` seconds is spent, every source waits
    until the window ends."""
    for _ in range(TRIES):
        try:
            with writing(engine).begin() as conn:
                row = _row(conn, form, source, now)
                if attempt is not None and row.last == attempt:
                    return max(0.0, (row.until - now).total_seconds())
                failures = 0 if now - row.until > FORGET_AFTER else row.failures
                until = now + timedelta(seconds=delay(failures + 1))
                conn.execute(sa.update(throttles).where(throttles.c.form == form, throttles.c.source == source)
                             .values(failures=failures + 1, until=until, last=attempt,
                                     since=row.since if failures else now))
                everyone = _row(conn, form, EVERYONE, now)
                window = timedelta(seconds=window_s)
                fresh = now - everyone.since > window
                spent = 1 if fresh else everyone.failures + 1
                start = now if fresh else everyone.since
                shared_until = start + window if spent >= budget else everyone.until
                conn.execute(sa.update(throttles).where(throttles.c.form == form, throttles.c.source == EVERYONE)
                             .values(failures=spent, since=start, until=shared_until))
                if fresh:  # once a window: forget the sources long quiet
                    conn.execute(sa.delete(throttles).where(throttles.c.form == form, throttles.c.source != EVERYONE,
                                                            throttles.c.until < now - FORGET_AFTER))
            return max(0.0, (max(until, shared_until) - now).total_seconds())
        except sa.exc.IntegrityError:
            continue  # another session made the row at that moment: count again
    return 0.0


def succeeded(engine: Engine, form: str, source: str) -> None:
    """A right try: the source starts again from zero (the form's global budget is unchanged)."""
    with writing(engine).begin() as conn:
        conn.execute(sa.delete(throttles).where(throttles.c.form == form, throttles.c.source == source))
