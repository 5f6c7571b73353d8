"""Pictures of the data model, without Streamlit: plotly figures, the graph viewer's JSON, Netron.

- ``overview_figures``, ``classify_figures``, ``partition_graph``, ``timeline_figures``: plotly
  figures (model-derived text HTML-escaped);
- ``model_explorer``: the model's graph and the partition overlays as Model Explorer's JSON;
- ``netron``: a per-model Netron server on loopback with a per-server token.
"""
