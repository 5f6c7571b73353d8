"""A ~20,000-node decoder: both pages render within AppTest's timeout, Netron is opt-in, and every
later render (same page, other page, new session) is served from the per-digest caches."""

from __future__ import annotations

import onnx

from dashboard.views import state


def test_20k_node_model_renders_once_then_from_cache(app, decoder_20k, monkeypatch):
    calls = {"load": 0, "ep": 0, "refined": 0}

    def counted(name, func):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return func(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(state, "load_model", counted("load", state.load_model))
    monkeypatch.setattr(state, "classify_ep", counted("ep", state.classify_ep))
    monkeypatch.setattr(state, "classify_refined", counted("refined", state.classify_refined))
    nodes = len(onnx.load(decoder_20k, load_external_data=False).graph.node)
    assert nodes >= 19_000

    at = app("--model", str(decoder_20k)).run()
    assert not at.exception and not at.error
    assert next(m.value for m in at.metric if m.label == "Nodes") == f"{nodes:,}"
    assert not at.get("iframe")  # the Netron frame waits for the user's go-ahead
    assert not at.toggle(key="netron_embed").value

    at.switch_page("pages/classifier.py").run()
    assert not at.exception and not at.error
    assert len([d for d in at.dataframe if "measured vs threshold" in d.value.columns]) == 2
    assert calls == {"load": 1, "ep": 1, "refined": 1}

    at.switch_page("pages/overview.py").run()
    at.run()
    other_session = app("--model", str(decoder_20k)).run()
    other_session.switch_page("pages/classifier.py").run()
    assert not at.exception and not other_session.exception
    assert calls == {"load": 1, "ep": 1, "refined": 1}

    at.toggle(key="netron_embed").set_value(True).run()
    assert len(at.get("iframe")) == 1
