"""The pages' side of the shared throttles (services.throttle.Shared): who is asking (the
browser's address as the proxy forwards it) and the wait message. Every form that accepts a secret
asks `refused(form)` before checking it, and reports the outcome with `failed` or `succeeded`."""

from __future__ import annotations

import math

import streamlit as st

from services import throttle

from .i18n import tr


def source() -> str:
    """This browser's throttle key: a digest of its address behind the trusted proxy."""
    try:
        headers = dict(st.context.headers or {})
        peer = st.context.ip_address
    except Exception:  # noqa: BLE001  (no request context: a bare script or a test run)
        headers, peer = {}, None
    return throttle.source_of(throttle.client_address(peer, headers))


def wait(form: str) -> float:
    """Seconds before a try at `form` from this browser is taken (0: go ahead)."""
    return throttle.SHARED[form].remaining(source())


def refused(form: str) -> bool:
    """True (with the wait shown) when a try at `form` from this browser must wait."""
    seconds = wait(form)
    if seconds <= 0:
        return False
    st.error(tr("throttle.wait", seconds=max(1, math.ceil(seconds))), icon=":material/timer:")
    return True


def failed(form: str, attempt: str | None = None) -> None:
    throttle.SHARED[form].failed(source(), attempt)


def succeeded(form: str) -> None:
    throttle.SHARED[form].succeeded(source())
