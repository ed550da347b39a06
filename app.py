"""Attention by Hand: the router and the frame (sidebar). Pages live in app_pages/.

`streamlit run app.py` serves `app` below (st.App: the profile cookie is set by the server, see
ui/profile_cookie.py; Nagle's algorithm is off on its connections, ui/nodelay.py) and answers an LMS at
/lti/… (LTI 1.3, ui/lti_routes.py); each page run executes this file as __main__ and draws the frame.
"""

import streamlit as st
from starlette.middleware import Middleware

from ui import progress, runs, theme
from ui.i18n import language_switch, resolve, tr
from ui.nodelay import NoDelay
from ui.profile_cookie import ProfileCookie

if __name__ != "__main__":  # imported by the server: the ASGI app (with the LTI endpoints, ui/lti_routes.py)
    from ui.lti_routes import ROUTES as LTI_ROUTES

    app = st.App(__file__, middleware=[Middleware(NoDelay), Middleware(ProfileCookie)], routes=LTI_ROUTES)
else:  # a page run
    with runs.turn():  # a few page runs at a time, in about the order they came (ui/runs.py)
        resolve()  # the language first: page titles below are translated
        st.set_page_config(page_title=tr("app.title"), page_icon=":material/grid_on:", layout="wide")
        theme.apply()  # contrast, scrolling equations, grids that stay grids on a phone

        assignments_page = st.Page("app_pages/assignments.py", title=tr("nav.assignments"),
                                   icon=":material/assignment:")
        pages = [
            st.Page("app_pages/home.py", title=tr("nav.home"), icon=":material/home:", default=True),
            st.Page("app_pages/practice.py", title=tr("nav.practice"), icon=":material/edit:"),
            st.Page("app_pages/check_work.py", title=tr("nav.check_work"), icon=":material/fact_check:"),
            st.Page("app_pages/progress.py", title=tr("nav.progress"), icon=":material/insights:"),
            st.Page("app_pages/formulas.py", title=tr("nav.formulas"), icon=":material/functions:"),
            st.Page("app_pages/glossary.py", title=tr("nav.glossary"), icon=":material/menu_book:"),
            assignments_page,
            st.Page("app_pages/gradebook.py", title=tr("nav.gradebook"), icon=":material/table_view:"),
        ]
        navigation = st.navigation(pages)
        if navigation is pages[0] and st.query_params.get("assignment"):
            # a bare share link, /?assignment=CODE, opens the assignment rather than Home
            st.switch_page(assignments_page, query_params=dict(st.query_params))
        language_switch()
        progress.subscribe()  # every graded attempt is stored under this browser's private profile
        progress.open_profile()
        progress.hand_to_browser()
        progress.confirm_ui(st.sidebar)  # a profile cookie this browser did not create files nothing unasked
        navigation.run()
