"""Make AppTest run app.py on every rerun, as a served app does.

A project with a ``app_pages/`` folder makes AppTest reset ``PagesManager.uses_pages_directory`` to True
before each run; after the first run it then executes the page alone (the old pages-folder mode)
and skips app.py, so the sidebar, the language and the listeners set up there vanish. A served app
calls st.navigation on every run, which sets the flag to False; this fixture does the same.
"""

from __future__ import annotations

import pytest
from streamlit.runtime.pages_manager import PagesManager


@pytest.fixture
def entrypoint_every_run(monkeypatch):
    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False  # what st.navigation in app.py sets in a served app

    monkeypatch.setattr(PagesManager, "__init__", init)
