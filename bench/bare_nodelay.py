"""bench/bare_practice.py served as app.py is served: an st.App with Nagle's algorithm off (ui/nodelay.py).

bench/bench_page.py and bench/bench_browser.py time it beside the bare page as Streamlit serves it alone, so a
ratio can be read both against what a person gets from a plain Streamlit page and against the same transport.
"""

from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from ui.nodelay import NoDelay

app = st.App(str(Path(__file__).with_name("bare_practice.py")), middleware=[Middleware(NoDelay)])
