"""Fingerprints of the matrices an exercise gives: an open exam's items are recognised by
their values, not by a seed, wherever else they are typed (Check my work) or drawn (Practice).

Matrices that carry nothing to recognise (all cells equal, an identity) get none. Values that share
ENOUGH matrices with an item match it: two of them (a head's X and W_Q of a multi-head item, an
attention item's Q and K), or all of an item that gives only one.

A matrix's fingerprint is the SHA-256 of its role (its name without a head's number: W_Q1 is a W_Q),
its shape and its values rounded to 6 decimals, so the same matrix read from an exercise's JSON, from
a NumPy array or from the text a learner typed gives the same one, and a small 0/1 matrix given as K
in one item and as Q in another is not taken for it. Plain Python: storage does not depend on the
exercise library.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .db import assignment_exercises, given_fingerprints, writing

NONE = "-"  # the row of an item that gives no matrix
PLACES = 6
ENOUGH = 2  # shared matrices that identify an item (fewer when the item gives fewer)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("inf", "-inf"):  # how exercises' JSON keeps infinities (masked scores)
        return float(value)
    return None


def role(name: str) -> str:
    """What a given matrix is, whatever head it belongs to: "W_Q1" and "W_Q" are both a W_Q."""
    return re.sub(r"\d+$", "", str(name))


def matrix_fingerprint(rows: Sequence[Sequence[Any]], name: str = "") -> str | None:
    """The fingerprint of a 2-D matrix (lists of numbers, "inf"/"-inf" allowed), or None when it is none
    or carries nothing to recognise (every cell the same, or an identity: examples use those)."""
    if not isinstance(rows, (list, tuple)) or not rows or not all(isinstance(r, (list, tuple)) and r for r in rows):
        return None
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        return None
    cells = []
    for row in rows:
        for value in row:
            x = _number(value)
            if x is None or math.isnan(x):
                return None
            cells.append(str(x) if math.isinf(x) else f"{round(x, PLACES) + 0.0:.{PLACES}f}")
    if len(set(cells)) == 1 or _identity(cells, len(rows), width):
        return None
    text = f"{role(name)}:{len(rows)}x{width}:" + ",".join(cells)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _identity(cells: list[str], rows: int, width: int) -> bool:
    one, zero = f"{1.0:.{PLACES}f}", f"{0.0:.{PLACES}f}"
    return rows == width and all(c == (one if i // width == i % width else zero) for i, c in enumerate(cells))


def of_given(given: Mapping[str, Any]) -> set[str]:
    """The fingerprints of the 2-D matrices among an exercise's given values (its to_dict()["given"])."""
    found = (matrix_fingerprint(v, name) for name, v in given.items())
    return {f for f in found if f is not None}


def store(conn: Connection, code: str, student_key: str, exercises: Mapping[int, Mapping[str, Any]]) -> None:
    """Keep the fingerprints of these stored exercises (item index → Exercise.to_dict()), in the caller's
    transaction; items already fingerprinted are left as they are."""
    rows = []
    for index, exercise in exercises.items():
        prints = of_given(exercise.get("given") or {}) or {NONE}
        count = 0 if prints == {NONE} else len(prints)
        rows += [{"assignment_code": code, "student_key": student_key, "item_index": int(index), "fingerprint": f,
                  "matrices": count} for f in sorted(prints)]
    if not rows:
        return
    table = given_fingerprints
    done = set(conn.execute(sa.select(table.c.item_index).where(
        table.c.assignment_code == code, table.c.student_key == student_key,
        table.c.item_index.in_({r["item_index"] for r in rows}))).scalars())
    rows = [r for r in rows if r["item_index"] not in done]
    if rows:
        conn.execute(sa.insert(table), rows)


def forget(conn: Connection, code: str, from_index: int = 0) -> None:
    """Drop the fingerprints of an assignment's items from `from_index` on (their exercises are gone)."""
    table = given_fingerprints
    conn.execute(sa.delete(table).where(table.c.assignment_code == code, table.c.item_index >= from_index))


def matching(engine: Engine, fingerprints: Iterable[str]) -> set[str]:
    """The codes of assignments with an item sharing ENOUGH given matrices with `fingerprints` (all of
    them when the item gives fewer)."""
    wanted = sorted({f for f in fingerprints if f and f != NONE})
    if not wanted:
        return set()
    table = given_fingerprints
    found = sa.func.count(sa.distinct(table.c.fingerprint))
    query = (sa.select(table.c.assignment_code).where(table.c.fingerprint.in_(wanted), table.c.matrices > 0)
             .group_by(table.c.assignment_code, table.c.student_key, table.c.item_index, table.c.matrices)
             .having(found >= sa.case((table.c.matrices < ENOUGH, table.c.matrices), else_=ENOUGH)))
    with engine.connect() as conn:
        return set(conn.execute(query).scalars())


def backfill(engine: Engine, batch: int = 500) -> int:
    """Fingerprint the stored exercises of a database from before fingerprints were kept (the migration of
    idempotent. Returns the items fingerprinted."""
    ae, table = assignment_exercises, given_fingerprints
    missing = (sa.select(ae.c.assignment_code, ae.c.student_key, ae.c.item_index, ae.c.exercise)
               .where(~sa.exists().where(table.c.assignment_code == ae.c.assignment_code,
                                         table.c.student_key == ae.c.student_key,
                                         table.c.item_index == ae.c.item_index)).limit(batch))
    total = 0
    for _ in range(10_000):
        with engine.connect() as conn:
            rows = conn.execute(missing).all()
        if not rows:
            break
        for _ in range(2):  # again if another replica fingerprinted some of them at that moment
            try:
                with writing(engine).begin() as conn:
                    for r in rows:
                        store(conn, r.assignment_code, r.student_key, {r.item_index: r.exercise or {}})
                break
            except sa.exc.IntegrityError:
                continue
        total += len(rows)
    return total
