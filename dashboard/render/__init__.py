"""Pictures of the data model, without Streamlit: plotly figures and the graph viewer servers.

- ``overview_figures``, ``classify_figures``, ``partition_graph``, ``timeline_figures``: plotly
  figures (model-derived text HTML-escaped);
- ``netron``: a per-model Netron server on loopback with a per-session token.
"""
