"""QNN Backend Lab: the dashboard's entry point.

    streamlit run app.py -- --model samples/llm_decoder_kv.onnx

Streamlit imports this file as an ``st.App`` (its public ASGI entry point) so that the web gate
(``dashboard.views.gate``) stands in front of every route: only a browser that presents the token
printed at start-up (or the operator's password) gets a page, a websocket or a file. Each browser
session then runs this same file as its script (``__name__ == "__main__"``).

Pages are the files in ``pages/`` (Streamlit's documented ``pages/`` folder convention); each is
one call into ``dashboard.views``. The navigation and the sidebar model picker are drawn by every
page (``dashboard.views.frame``), so a page opened by its URL works like one opened from the list.
Opening the app's root selects ``--model`` (or the first bundled sample) and shows the Overview.
"""

import streamlit as st

if __name__ == "__main__":  # a browser session's script run
    from dashboard.views import frame

    frame.landing()
else:  # `streamlit run app.py` serving the dashboard
    from starlette.middleware import Middleware

    from dashboard.views import gate

    app = st.App("app.py", middleware=[Middleware(gate.Gate)], lifespan=gate.lifespan)
