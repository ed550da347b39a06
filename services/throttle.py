"""Throttling of guesses in one session: teacher keys on the gradebook, share codes on assignments.

The first FREE wrong tries cost nothing; after that each further wrong try must wait longer before
the next one is taken: BASE seconds, then twice that, … up to CAP. A right try clears the record.
The record is a plain dict the caller keeps (Streamlit's session state), so this module knows
nothing of Streamlit; the clock is injected for tests. Verification itself is unchanged and stays
constant-time (scrypt and hmac.compare_digest in storage): the throttle only decides whether a try
is taken at all.

    gate = Throttle()
    wait = gate.remaining(record)          # > 0: refuse this try, say how long to wait
    gate.failed(record, attempt=code)      # after a wrong key or an unknown code
    gate.succeeded(record)                 # after a right one
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

FREE = 3  # wrong tries before any wait
BASE_S = 2.0  # the first wait
CAP_S = 300.0  # the longest wait


@dataclass
class Throttle:
    free: int = FREE
    base: float = BASE_S
    cap: float = CAP_S
    clock: Callable[[], float] = field(default=time.monotonic)

    def delay(self, failures: int) -> float:
        """The wait after `failures` wrong tries in a row: 0, …, 0, base, 2·base, 4·base, … ≤ cap."""
        over = failures - self.free - 1
        if over < 0:
            return 0.0
        return min(self.cap, self.base * 2.0 ** min(over, 62))

    def remaining(self, record: MutableMapping[str, Any]) -> float:
        """Seconds to wait before the next try is taken (0: go ahead)."""
        return max(0.0, float(record.get("until", 0.0)) - self.clock())

    def remaining_text(self, record: MutableMapping[str, Any]) -> int:
        """The wait in whole seconds, rounded up (for the message)."""
        return max(1, math.ceil(self.remaining(record)))

    def failed(self, record: MutableMapping[str, Any], attempt: str | None = None) -> float:
        """Count a wrong try and return the wait it sets. The same attempt as the last one counted
        (a page rerun showing the same unknown code again) is not counted twice."""
        if attempt is not None and record.get("last") == attempt:
            return self.remaining(record)
        failures = int(record.get("failures", 0)) + 1
        record["failures"] = failures
        record["last"] = attempt
        wait = self.delay(failures)
        record["until"] = self.clock() + wait
        return wait

    def succeeded(self, record: MutableMapping[str, Any]) -> None:
        record.clear()


GATE = Throttle()  # the pages' throttle: 3 free wrong tries, then 2 s, 4 s, 8 s … up to 5 minutes


def record_in(state: MutableMapping[str, Any], name: str) -> MutableMapping[str, Any]:
    """The throttle record `name` kept in `state` (a session's state), made empty the first time."""
    key = f"throttle.{name}"
    if not isinstance(state.get(key), dict):
        state[key] = {}
    return state[key]
