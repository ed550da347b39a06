"""An open exam's items are computed nowhere else: Check my work and Practice ask here first.

Matched by the given matrices (their fingerprints are stored with every assignment's exercises), not
by a seed: typing an exam item's Q, K and V into Check my work is refused like drawing it on Practice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import storage
from storage.fingerprints import matrix_fingerprint

from . import db


def fingerprints(matrices: Mapping[str, Any]) -> set[str]:
    """The fingerprints of the 2-D matrices among these values, by name (Q, K, V, X, W_Q …: the names
    the exercises give them)."""
    found = set()
    for name, value in matrices.items():
        array = np.asarray(value, dtype=float) if not isinstance(value, str) else None
        if array is not None and array.ndim == 2:
            found.add(matrix_fingerprint(array.tolist(), name))
    return {f for f in found if f is not None}


def locked(matrices: Mapping[str, Any]) -> bool:
    """Do these matrices give an item of an exam that is running (or not open yet)? Then the page must
    not compute it. False when the database cannot be asked (Practice keeps working without it)."""
    prints = fingerprints(matrices)
    if not prints:
        return False
    try:
        with db.guarded():
            return bool(storage.open_exams_giving(db.engine(), prints))
    except db.Unavailable:
        return False
