"""QNN Backend Lab: the dashboard's entry point.

    streamlit run app.py -- --model samples/llm_decoder_kv.onnx

Pages are the files in ``pages/`` (Streamlit's documented ``pages/`` folder convention); each is
one call into ``dashboard.views``. The navigation and the sidebar model picker are drawn by every
page (``dashboard.views.frame``), so a page opened by its URL works like one opened from the list.
Opening the app's root selects ``--model`` (or the first bundled sample) and shows the Overview.
"""

from dashboard.views import frame

frame.landing()
