"""The in-process Python API: HotMigrationSession (CPU EP -> HTP simulator) and auto_session."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from deadlines import join_all

from dashboard.errors import UserError
from dashboard.intake.samples import sample_path
from dashboard.runtime.config import SessionConfig
from dashboard.timeline.api import HotMigrationSession, auto_session
from dashboard.timeline.model import EVENT_KINDS, Event

CNN = str(sample_path("cnn_classifier.onnx"))
HTP_FP16 = SessionConfig(backend="htp", fp16=True, soc="sc8380xp")


def feeds(seed: int = 0) -> dict[str, np.ndarray]:
    return {"pixel_values": np.random.default_rng(seed).standard_normal((1, 3, 224, 224)).astype(np.float32)}


def input_name() -> str:
    from dashboard.intake.reader import load_model

    return load_model(CNN).inputs[0].name


def test_serves_on_fast_at_once_then_swaps_to_htp_with_agreeing_outputs():
    name = input_name()
    x = {name: feeds()["pixel_values"]}
    seen = []
    with HotMigrationSession(CNN, SessionConfig(backend="cpu"), HTP_FP16, on_event=seen.append) as sess:
        assert sess.backend == "cpu"
        before = sess.run(None, x)[0]
        assert sess.wait(timeout=300), sess.failure
        assert sess.backend == "htp"
        after = sess.run(None, x)[0]
    kinds = [e.kind for e in sess.events]
    assert kinds[:3] == ["session_create_start", "session_create_end", "serve_start"]
    # The timeline's own records and kinds: the library and the dashboard migrate the same way.
    assert all(isinstance(e, Event) and e.kind in EVENT_KINDS for e in sess.events)
    for kind in ("warmup_start", "warmup_end", "swap", "drain_end", "session_released"):
        assert kind in kinds
    assert kinds.index("warmup_end") < kinds.index("swap") < kinds.index("drain_end")
    assert [e.kind for e in seen] == kinds  # the callback saw every event, in order
    assert before.argmax() == after.argmax()
    np.testing.assert_allclose(before, after, atol=2e-2)  # fp16 on HTP vs fp32 on CPU


def test_calls_racing_the_swap_are_each_served_once():
    name = input_name()
    x = {name: feeds(1)["pixel_values"]}
    results, errors = [], []
    sess = HotMigrationSession(CNN, SessionConfig(backend="cpu"), HTP_FP16)

    def client():
        try:
            for _ in range(200):
                results.append(sess.run(None, x)[0].argmax())
                if sess.migrated.is_set() and len(results) > 5:
                    return
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(2)]
    for t in threads:
        t.start()
    join_all(threads, "the clients racing the swap", seconds=300)
    assert sess.wait(timeout=300)
    sess.close()
    assert not errors
    assert len(set(results)) == 1


def test_target_failure_keeps_serving_on_fast_with_the_runtime_reason():
    name = input_name()
    x = {name: feeds()["pixel_values"]}
    bad = SessionConfig(backend="htp", provider_options={"htp_bf16_enable": "1"})  # the EP refuses it without a SoC
    with HotMigrationSession(CNN, SessionConfig(backend="cpu"), bad) as sess:
        assert sess.wait(timeout=120) is False
        assert sess.backend == "cpu"
        assert sess.run(None, x)[0].shape[0] == 1
    assert "bf16 mode is enabled but soc_model is not specified" in sess.failure.lower()
    assert sess.events[-1].kind == "migration_failed"


def test_closed_session_refuses_calls():
    sess = HotMigrationSession(CNN, SessionConfig(backend="cpu"), HTP_FP16)
    sess.close()
    with pytest.raises(UserError, match="closed"):
        sess.run(None, {input_name(): feeds()["pixel_values"]})


def test_auto_session_follows_the_classifier():
    handle, verdict = auto_session(CNN)
    assert verdict.verdict == "NonGenAI"
    assert handle.config.backend == "htp"
    assert "QNNExecutionProvider" in handle.session.get_providers()


def test_auto_session_for_genai_needs_a_gpu_that_initializes():
    """GenAI routes to the GPU; on a host without an Adreno that is an error naming QNN's reason,
    not a session that silently runs on the CPU EP."""
    from dashboard.runtime.qnn import probe_backend

    if probe_backend("gpu").ok:
        pytest.skip("this host has a QNN GPU")
    with pytest.raises(UserError, match="QNN gpu is not running this model"):
        auto_session(str(sample_path("llm_decoder_kv.onnx")))
