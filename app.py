"""QNN Backend Lab: the dashboard's entry point.

    streamlit run app.py -- --model samples/llm_decoder_kv.onnx

Every page is one line in PAGES (its file in pages/ calls a view in dashboard/views). The sidebar
model picker runs before the page, on every page, so each page finds the selected model in
dashboard.views.state.
"""

import streamlit as st

from dashboard.views import intake

st.set_page_config(layout="wide", page_title="QNN Backend Lab", page_icon=":material/memory:")

PAGES = [
    st.Page("pages/overview.py", title="Overview", icon=":material/account_tree:", default=True),
    st.Page("pages/classifier.py", title="Classifier", icon=":material/rule:"),
    st.Page("pages/partitions.py", title="Partitions", icon=":material/call_split:"),
    st.Page("pages/devices.py", title="Devices", icon=":material/devices:"),
    st.Page("pages/timeline.py", title="Timeline", icon=":material/timeline:"),
]

page = st.navigation(PAGES)
intake.sidebar()
page.run()
