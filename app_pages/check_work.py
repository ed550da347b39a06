"""Check my work: pick a topic, type your own inputs and the steps you computed by hand; find the first wrong step."""

import streamlit as st

from ui import check_work as cw
from ui.i18n import tr

st.title(tr("checkwork.page.title"))
st.markdown(tr("checkwork.page.intro"))
cw.ensure_defaults()

topic = cw.topic_ui()
inputs, stated = cw.inputs_ui(topic)
claimed = cw.claims_ui(topic)

row = st.container(horizontal=True)  # the buttons side by side, each as wide as its label
if row.button(tr("checkwork.page.check"), type="primary", icon=":material/fact_check:", key="checkwork.check_button"):
    st.session_state[cw.CHECKED] = True
row.button(tr("checkwork.page.fill_example"), on_click=cw.fill_example, icon=":material/edit_note:",
           key="checkwork.fill_button")
row.button(tr("checkwork.page.example"), on_click=cw.reset_example, icon=":material/restart_alt:",
           key="checkwork.example_button")

if st.session_state.get(cw.CHECKED):
    report = cw.run(topic, inputs, claimed, stated)
    cw.report_ui(report)
    cw.fits_ui(topic, inputs, claimed, stated, report)
