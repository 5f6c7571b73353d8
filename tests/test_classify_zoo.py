"""The refined classifier on real models (``tests/real_zoo.py``): pretrained models shipped in
packages and real architectures exported here. Every model's verdict comes from the one table;
every rule added for issue 11 is checked on at least two models of its family, with negative
cases (CTC recognisers, encoders, same-shaped image in/out, VAD states) that must not fire it."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dashboard.classify.refined import CONFIDENT_MARGIN, classify_refined
from dashboard.classify.verdicts import GENAI, NON_GENAI, UNKNOWN, Classification, backend_for
from dashboard.intake.reader import load_model
from tests.real_zoo import (AR_TTS, CAPTIONER, CAUSAL_TEXT_ENCODER, DATA, DECODER_KV, LM_ANY_EXPORTER, LM_OTHER_MASK,
                            NAR_TTS, NO_EVIDENCE, REAL_ZOO, SEQUENCE_CLASSIFIER, SSM_LM, STATE_NEGATIVE,
                            WINDOW_NEGATIVE)

F, I64 = TensorProto.FLOAT, TensorProto.INT64
LOOP_SIGNALS = ("causal_mask", "step_decoder", "greedy_feedback", "seq2seq_decoder", "frame_decoder")
BY_FILE = {m.path.name: m for m in REAL_ZOO}


@lru_cache(maxsize=None)
def refined(file: str) -> Classification:
    return classify_refined(load_model(BY_FILE[file].path))


def fired(result: Classification, name: str) -> list[str]:
    signal = next(s for s in result.signals if s.name == name)
    return signal.evidence if signal.fired and signal.score > 0 else []


@pytest.mark.parametrize("file", sorted(BY_FILE))
def test_real_model_verdict_and_backend(file):
    entry, result = BY_FILE[file], refined(file)
    assert result.verdict == entry.expected, result.explanation
    assert result.backend == backend_for(entry.expected)
    assert result.explanation.startswith(f"{result.verdict}") and result.explanation.count(". ") == 0


def test_every_committed_model_is_in_the_table():
    committed = {p.name for folder in ("real", "exports", "families") for p in (DATA / folder).glob("*.onnx")}
    assert committed == set(BY_FILE)


def test_unknown_is_reserved_for_models_without_evidence():
    """At most one Unknown per 20 real models; here none outside the single-op controls."""
    unknown = [m.path.name for m in REAL_ZOO if refined(m.path.name).verdict == UNKNOWN]
    assert unknown == [m.path.name for m in REAL_ZOO if m.family == NO_EVIDENCE]
    for name in unknown:
        assert refined(name).genai_score == refined(name).non_genai_score == 0.0


@pytest.mark.parametrize("file", sorted(f for f, m in BY_FILE.items() if m.expected == GENAI))
def test_genai_without_a_kv_cache_shows_the_autoregressive_loop(file):
    result = refined(file)
    if not fired(result, "kv_cache_pairs"):
        assert any(fired(result, name) for name in LOOP_SIGNALS), result.explanation


# one rule, two or more models of its family ------------------------------------------------------

@pytest.mark.parametrize("signal, files, text", [
    ("step_decoder", ["romanizer_ar_decoder.onnx", "romanizer_fa_decoder.onnx", "torch_gru_step_decoder.onnx",
                      "torch_lstm_attention_step_decoder.onnx"], "is carried to output"),
    ("greedy_feedback", ["torch_greedy_gru_translator.onnx", "torch_greedy_captioner.onnx"],
     "the next step reads this step's output"),
    ("greedy_feedback", ["torch_gru_greedy_loop.onnx", "torch_decoder_greedy_loop.onnx"],
     "the loop carries it to its next iteration"),
    ("seq2seq_decoder", ["torch_gru_seq2seq.onnx", "torch_transformer_seq2seq.onnx", "hf_whisper_decoder.onnx",
                         "hf_t5_decoder.onnx", "hf_marian_decoder.onnx"], "target tokens"),
    ("causal_mask", ["hf_gpt2_no_cache.onnx", "hf_llama_no_cache.onnx"], "compares positions"),
    ("image_input", ["rapidocr_ppocrv4_det.onnx", "rapidocr_ppocrv4_rec.onnx", "torch_yolo_dynamic_hw.onnx",
                     "hf_segformer.onnx"], "feeds conv stem"),  # symbolic height and width, weights as Constants
    ("image_input", ["torch_resnet18_dynamic_int8.onnx", "ddddocr_common_old.onnx"], "ConvInteger"),
    ("image_input", ["torch_resnet18_nhwc.onnx"], "(NHWC)"),
    ("audio_input", ["torch_m5_waveform.onnx", "hf_wav2vec2_ctc.onnx", "silero_vad.onnx"], "waveform input"),
    ("audio_input", ["torch_linear_spectrogram_lstm.onnx"], "257 features per frame"),
    ("audio_input", ["torch_stft_classifier.onnx"], "STFT"),
    ("recurrent_cells", ["ddddocr_common_old.onnx", "torch_lstm_kws_dynamic_int8.onnx",
                         "torch_lstm_tagger_dynamic_int8.onnx"], "DynamicQuantizeLSTM"),
    ("dense_feature_input", ["torch_embedding_layernorm_head.onnx", "torch_embedding_if_head.onnx"],
     "(dense layer)"),
])
def test_rule_fires_on_its_family(signal, files, text):
    for file in files:
        evidence = fired(refined(file), signal)
        assert any(text in item for item in evidence), (file, evidence)


@pytest.mark.parametrize("file", ["torch_resnet18_symbolic.onnx", "ddddocr_common_det.onnx",
                                  "rapidocr_ppocr_mobile_cls.onnx"])
def test_a_deep_cnn_is_decisive_on_its_own(file):
    cnn = next(s for s in refined(file).signals if s.name == "cnn_structure")
    assert cnn.value >= 14 and cnn.score == 10.0


@pytest.mark.parametrize("file", ["captcha_crnn.onnx", "ddddocr_common.onnx", "rapidocr_ppocrv4_rec.onnx",
                                  "hf_wav2vec2_ctc.onnx", "torch_crnn_ctc.onnx", "torch_crnn_gru_ctc.onnx",
                                  "torch_conv_ctc_asr.onnx"])
def test_ctc_recognisers_are_not_lm_heads(file):
    """A softmax over a large alphabet at every time step, with no feedback and no token input."""
    result = refined(file)
    assert result.verdict == NON_GENAI and result.confidence == "confident"
    assert not any(fired(result, name) for name in (*LOOP_SIGNALS, "vocab_logits", "kv_cache_pairs"))


@pytest.mark.parametrize("file", ["romanizer_ar_encoder.onnx", "romanizer_fa_encoder.onnx", "hf_bert_encoder.onnx",
                                  "hf_t5_encoder.onnx", "hf_marian_encoder.onnx"])
def test_text_encoders_stay_non_genai(file):
    result = refined(file)
    assert fired(result, "text_encoder") and not any(fired(result, name) for name in LOOP_SIGNALS)
    assert result.margin >= CONFIDENT_MARGIN


@pytest.mark.parametrize("file", ["torch_unet_same_shape.onnx", "silero_vad.onnx", "silero_vad_16k_sequence.onnx",
                                  "faster_whisper_silero_vad_v6.onnx", "torch_linear_spectrogram_lstm.onnx"])
def test_a_state_or_same_shaped_output_without_tokens_is_no_decoder(file):
    """Same-shaped image in/out (U-Net), a VAD's carried LSTM state, an enhanced spectrogram: none
    is a KV cache or a step decoder."""
    result = refined(file)
    assert result.verdict == NON_GENAI
    assert not fired(result, "kv_cache_pairs") and not fired(result, "step_decoder")


# issue 20's families: each rule on every member of its family, chosen by family, never by file ---

def members(*families: str) -> list[str]:
    return sorted(m.path.name for m in REAL_ZOO if m.family in families)


@pytest.mark.parametrize("file", members(SSM_LM))
def test_a_state_space_step_carries_its_state_whatever_its_rank(file):
    """Mamba's conv and SSM states (3-D per layer or stacked 4-D), RWKV's packed state: the state
    comes back out, so the token input and the vocabulary output make a step decoder, and no state
    is read as an image, audio or features."""
    result = refined(file)
    assert any("is carried to output" in e for e in fired(result, "step_decoder"))
    assert not any(fired(result, name) for name in ("image_shaped_input", "image_input", "dense_feature_input",
                                                    "audio_input", "text_encoder"))
    assert "a step decoder" in result.explanation and result.confidence == "confident"


@pytest.mark.parametrize("file", members(AR_TTS))
def test_an_autoregressive_speech_decoder_feeds_its_frames_back(file):
    """Frames in, frames out and a stop head; a cross-attention past (if any) is the encoder half
    of the cache, never dense features or an image."""
    result = refined(file)
    assert any("a stop head" in e for e in fired(result, "frame_decoder"))
    assert "an autoregressive speech decoder" in result.explanation and result.confidence == "confident"
    assert not any(fired(result, name) for name in ("image_shaped_input", "audio_input", "recurrent_cells"))
    assert not any("past" in e for e in fired(result, "dense_feature_input"))


def test_cross_attention_past_is_the_encoder_half_of_the_cache():
    """Seq2seq and speech decoders with a past read the encoder's keys and values as inputs with no
    present output: found as the cache's encoder half on several of them, never as features."""
    with_cross = [f for f in members(AR_TTS, DECODER_KV) if any("encoder half of the cache" in e
                                                               for e in fired(refined(f), "kv_cache_pairs"))]
    assert len(with_cross) >= 3
    assert not any("encoder" in e for f in with_cross for e in fired(refined(f), "dense_feature_input"))


@pytest.mark.parametrize("file", members(CAUSAL_TEXT_ENCODER))
def test_a_causal_mask_does_not_make_a_decoder_of_a_pooled_encoder(file):
    result = refined(file)
    assert fired(result, "pooled_embedding") and fired(result, "text_encoder")
    assert not fired(result, "vocab_logits") and result.confidence == "confident"
    assert "a text encoder" in result.explanation and "a pooled embedding" in result.explanation


def test_the_causal_text_encoders_do_carry_a_mask():
    assert len([f for f in members(CAUSAL_TEXT_ENCODER) if fired(refined(f), "causal_mask")]) >= 3


@pytest.mark.parametrize("file", members(LM_OTHER_MASK))
def test_causal_masks_are_found_across_exporters(file):
    result = refined(file)
    assert fired(result, "causal_mask") and fired(result, "vocab_logits")
    assert "a causal mask" in result.explanation and result.confidence == "confident"


@pytest.mark.parametrize("file", members(CAPTIONER))
def test_a_captioner_image_stem_feeds_its_text_decoder(file):
    result = refined(file)
    assert fired(result, "image_input") and any("reaches the vocabulary output" in e
                                                for e in fired(result, "image_to_text"))
    assert "a captioner" in result.explanation and result.confidence == "confident"


@pytest.mark.parametrize("file", members(STATE_NEGATIVE, NAR_TTS, WINDOW_NEGATIVE))
def test_state_frames_or_positions_without_decoding_are_no_decoder(file):
    """A streaming encoder's caches, a video model's 4-D states, a memory encoder, phonemes to mel
    in one pass, positions compared for a window: none is a decoding loop."""
    result = refined(file)
    assert not any(fired(result, name) for name in (*LOOP_SIGNALS, "kv_cache_pairs", "image_to_text"))


# issue 28's families: every member, chosen by family -------------------------------------------

@pytest.mark.parametrize("file", members(LM_ANY_EXPORTER))
def test_decoder_only_lms_are_decoders_whatever_the_exporter(file):
    """Six architectures, dynamo and TorchScript, with and without a cache: without one the causal
    mask (however the exporter builds it) and the vocabulary logits decide; with one every past is
    paired with its present, none is mistaken for a cross-attention past."""
    model, result = load_model(BY_FILE[file].path), refined(file)
    assert result.verdict == GENAI and result.confidence == "confident", result.explanation
    assert fired(result, "vocab_logits") and not fired(result, "text_encoder")
    pasts = [spec.name for spec in model.inputs if spec.name.startswith("past_key_values")]
    if pasts:
        pairs = fired(result, "kv_cache_pairs")
        assert len(pairs) == len(pasts) and not any("encoder half" in e for e in pairs), pairs
    else:
        assert fired(result, "causal_mask") and "a causal mask" in result.explanation


@pytest.mark.parametrize("file", members(SEQUENCE_CLASSIFIER))
def test_sequence_classifiers_are_classifiers(file):
    """Bytes, nucleotides, residues or token ids in, a class output, no decoder structure: the class
    head over the sequence is the evidence (read as a signal, or pooled from the embeddings)."""
    result = refined(file)
    assert result.verdict == NON_GENAI and result.confidence == "confident", result.explanation
    assert fired(result, "sequence_classifier") or fired(result, "pooled_embedding")
    assert not any(fired(result, name) for name in (*LOOP_SIGNALS, "kv_cache_pairs", "vocab_logits"))


def test_sequence_classifier_fires_on_the_signal_reads_of_its_family():
    """Every way a member reads its integers without a vocabulary (cast, OneHot, the dynamo
    exporter's Equal-against-every-value one-hot, a nucleotide alphabet) is found on some member."""
    evidence = [e for f in members(SEQUENCE_CLASSIFIER) for e in fired(refined(f), "sequence_classifier")]
    assert any("read as a signal" in e for e in evidence) and len(evidence) >= 3


def _int_sequence_model(tmp_path, one_hot: str, output_shape, name: str) -> Classification:
    """ids [b, 64] -> one-hot (``OneHot`` or ``Equal`` against every value) -> MatMul -> ReduceMean
    (or not) -> an output shaped ``output_shape``."""
    values = numpy_helper.from_array(np.arange(4, dtype=np.int64), "values")
    if one_hot == "OneHot":
        nodes = [helper.make_node("OneHot", ["ids", "depth", "off_on"], ["hot"], name="onehot", axis=-1)]
        inits = [numpy_helper.from_array(np.array(4, np.int64), "depth"),
                 numpy_helper.from_array(np.array([0, 1], np.float32), "off_on")]
    else:
        nodes = [helper.make_node("Unsqueeze", ["ids", "last"], ["col"]),
                 helper.make_node("Equal", ["col", "values"], ["eq"], name="eq"),
                 helper.make_node("Cast", ["eq"], ["hot"], to=F)]
        inits = [numpy_helper.from_array(np.array([-1], np.int64), "last")]
    nodes.append(helper.make_node("MatMul", ["hot", "w"], ["h"], name="dense"))
    if len(output_shape) == 2:
        nodes.append(helper.make_node("ReduceMean", ["h"], ["y"], axes=[1], keepdims=0))
    else:
        nodes.append(helper.make_node("Identity", ["h"], ["y"]))
    inits += [values, _weight("w", 4, 6)]
    return _classify(tmp_path, nodes, [helper.make_tensor_value_info("ids", I64, ["b", 64])],
                     [helper.make_tensor_value_info("y", F, output_shape)], inits, name)


@pytest.mark.parametrize("one_hot", ["OneHot", "Equal"])
def test_a_one_hot_sequence_with_a_class_output_is_a_classifier(tmp_path, one_hot):
    result = _int_sequence_model(tmp_path, one_hot, ["b", 6], f"seq_{one_hot}")
    assert any("read as a signal by MatMul 'dense'" in e for e in fired(result, "sequence_classifier"))
    assert result.verdict == NON_GENAI and "a sequence classifier" in result.explanation


def test_an_integer_sequence_without_a_class_output_is_no_sequence_classifier(tmp_path):
    """One vector per position ([b, 64, 6]) is not a class output: the rule stays silent."""
    result = _int_sequence_model(tmp_path, "Equal", ["b", 64, 6], "seq_per_position")
    assert not fired(result, "sequence_classifier")


def test_positions_gathered_from_one_grid_and_compared_are_a_causal_mask(tmp_path):
    """torch.export's vmapped mask: the query's and the key's position gathered (GatherND) out of one
    Range-built grid and compared; the same gather against a lengths input is a padding mask."""
    def build(right: str, name: str) -> Classification:
        nodes = [helper.make_node("Gather", ["wte", "input_ids"], ["x"], name="embed"),
                 helper.make_node("Shape", ["input_ids"], ["shape"], start=1, end=2),
                 helper.make_node("Squeeze", ["shape"], ["seq"]),
                 helper.make_node("Range", ["zero", "seq", "one"], ["positions"], name="arange"),
                 helper.make_node("Unsqueeze", ["positions", "axis0"], ["grid"]),
                 helper.make_node("GatherND", ["grid", "q_index"], ["q_pos"], name="q_gather"),
                 helper.make_node("GatherND", [right, "k_index"], ["k_pos"], name="k_gather"),
                 helper.make_node("LessOrEqual", ["k_pos", "q_pos"], ["allowed"], name="mask"),
                 helper.make_node("Where", ["allowed", "x", "neg"], ["masked"], name="apply")]
        index = np.zeros((1, 1, 2), np.int64)
        inits = [_weight("wte", 300, 8), numpy_helper.from_array(np.array(0, np.int64), "zero"),
                 numpy_helper.from_array(np.array(1, np.int64), "one"),
                 numpy_helper.from_array(np.array([0], np.int64), "axis0"),
                 numpy_helper.from_array(index, "q_index"), numpy_helper.from_array(index, "k_index"),
                 numpy_helper.from_array(np.array(-1e9, np.float32), "neg")]
        inputs = [helper.make_tensor_value_info("input_ids", I64, ["b", "s"]),
                  helper.make_tensor_value_info("lengths", I64, [1, "b"])]
        return _classify(tmp_path, nodes, inputs, [helper.make_tensor_value_info("masked", F, None)], inits, name)

    causal = fired(build("grid", "gathered_causal"), "causal_mask")
    assert any("compares positions from Range 'arange' and Range 'arange'" in e for e in causal)
    assert not fired(build("lengths", "gathered_padding"), "causal_mask")


def test_explanation_names_the_step_decoder_evidence():
    assert refined("romanizer_ar_decoder.onnx").explanation.startswith(
        "GenAI (confident, margin 28): a token input 'prefix' plus a step state in and out ('hidden' -> "
        "'hidden_out'), and a vocabulary-sized output (160): a step decoder")


# the same rules on hand-built graphs (second models of a family, negatives) ------------------------

def _classify(tmp_path, nodes, inputs, outputs, inits, name):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return classify_refined(load_model(path))


def _weight(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def test_one_channel_waveform_first_and_mfcc_frames(tmp_path):
    conv = helper.make_node("Conv", ["audio", "w"], ["y"], name="front", strides=[4])
    wave = _classify(tmp_path, [conv], [helper.make_tensor_value_info("audio", F, ["b", 1, "samples"])],
                     [helper.make_tensor_value_info("y", F, None)], [_weight("w", 16, 1, 40)], "wave")
    assert any("(one channel)" in e for e in fired(wave, "audio_input"))
    mfcc = _classify(tmp_path, [helper.make_node("Conv", ["mfcc", "w"], ["y"], name="c1")],
                     [helper.make_tensor_value_info("mfcc", F, ["b", 20, "frames"])],
                     [helper.make_tensor_value_info("y", F, None)], [_weight("w", 32, 20, 3)], "mfcc")
    assert any("20 features per frame" in e for e in fired(mfcc, "audio_input")) and mfcc.verdict == NON_GENAI


def test_wide_single_channel_conv_is_an_in_graph_filterbank(tmp_path):
    nodes = [helper.make_node("Unsqueeze", ["pcm", "axis"], ["x"], name="unsq"),
             helper.make_node("Conv", ["x", "w"], ["y"], name="stft_as_conv", strides=[160])]
    result = _classify(tmp_path, nodes, [helper.make_tensor_value_info("pcm", F, ["b", "n"])],
                       [helper.make_tensor_value_info("y", F, None)],
                       [_weight("w", 257, 1, 512), numpy_helper.from_array(np.array([1], np.int64), "axis")], "fb")
    assert any("1-D filterbank over one channel" in e for e in fired(result, "audio_input"))


def test_argmax_into_a_label_table_is_no_greedy_loop(tmp_path):
    """A classifier that maps its ArgMax to label ids (a 1-D table) does not generate."""
    nodes = [helper.make_node("Gemm", ["x", "w"], ["scores"], name="fc"),
             helper.make_node("ArgMax", ["scores"], ["best"], name="argmax", axis=1),
             helper.make_node("Gather", ["labels", "best"], ["label"], name="lookup")]
    inits = [_weight("w", 64, 10), numpy_helper.from_array(np.arange(10, dtype=np.int64), "labels")]
    result = _classify(tmp_path, nodes, [helper.make_tensor_value_info("x", F, ["b", 64])],
                       [helper.make_tensor_value_info("label", I64, ["b"])], inits, "labels")
    assert not fired(result, "greedy_feedback") and result.verdict == NON_GENAI


def _looped(body_nodes, carried_in, carried_out, carried_type, body_inits, outer_input, outer_type):
    """A Loop over ``body_nodes`` carrying one state (``carried_in`` -> ``carried_out``) from the
    graph input ``outer_input``, with the body's own initializers."""
    body = helper.make_graph(
        body_nodes + [helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info(carried_in, carried_type, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info(carried_out, carried_type, None)], body_inits)
    nodes = [helper.make_node("Loop", ["steps", "", outer_input], ["final"], name="loop", body=body)]
    inputs = [helper.make_tensor_value_info(outer_input, outer_type, ["b"]),
              helper.make_tensor_value_info("steps", I64, [])]
    return nodes, inputs, [helper.make_tensor_value_info("final", outer_type, None)]


def test_a_loop_carrying_a_label_lookup_or_a_float_state_is_no_greedy_loop(tmp_path):
    """The carried-state edge only matters where the loop feeds its ArgMax back into a 2-D embedding:
    a loop that re-maps a label through a 1-D table, or refines a float state, does not generate."""
    lookup = [helper.make_node("Gather", ["labels", "label_in"], ["code"], name="lookup"),
              helper.make_node("Cast", ["code"], ["codef"], to=F),
              helper.make_node("Unsqueeze", ["codef", "one"], ["col"]),
              helper.make_node("MatMul", ["col", "w"], ["scores"], name="fc"),
              helper.make_node("ArgMax", ["scores"], ["label_out"], name="argmax", axis=-1, keepdims=0)]
    inits = [numpy_helper.from_array(np.arange(10, dtype=np.int64), "labels"),
             numpy_helper.from_array(np.array([-1], np.int64), "one"), _weight("w", 1, 10)]
    nodes, inputs, outputs = _looped(lookup, "label_in", "label_out", I64, inits, "label", I64)
    result = _classify(tmp_path, nodes, inputs, outputs, [], "label_loop")
    assert not fired(result, "greedy_feedback") and result.verdict != GENAI
    refine = [helper.make_node("MatMul", ["x_in", "w"], ["m"], name="fc"),
              helper.make_node("Tanh", ["m"], ["x_out"])]
    nodes, inputs, outputs = _looped(refine, "x_in", "x_out", F, [_weight("w", 8, 8)], "features", F)
    result = _classify(tmp_path, nodes, inputs, outputs, [], "refine_loop")
    assert not fired(result, "greedy_feedback") and result.verdict != GENAI


@pytest.mark.parametrize("pick, kind", [("ArgMax", "greedy"), ("Multinomial", "sampled")])
def test_decoding_feedback_through_a_loop_is_seen_and_said(tmp_path, pick, kind):
    """An embed -> logits -> pick step as a Loop body, the token picked greedily or sampled: the
    evidence says the loop carries the token, and the model is GenAI."""
    step = [helper.make_node("Gather", ["emb", "tok_in"], ["e"], name="embed"),
            helper.make_node("MatMul", ["e", "w"], ["logits"], name="lm_head")]
    if pick == "ArgMax":
        step.append(helper.make_node("ArgMax", ["logits"], ["tok_out"], name="pick", axis=-1, keepdims=0))
    else:
        step += [helper.make_node("Multinomial", ["logits"], ["sample"], name="pick", dtype=I64),
                 helper.make_node("Squeeze", ["sample", "last"], ["tok_out"])]
    inits = [_weight("emb", 300, 16), _weight("w", 16, 300), numpy_helper.from_array(np.array([-1], np.int64), "last")]
    nodes, inputs, outputs = _looped(step, "tok_in", "tok_out", I64, inits, "bos", I64)
    result = _classify(tmp_path, nodes, inputs, outputs, [], "tiny_generate")
    assert any(e.startswith(f"{pick} ") and "the loop carries it to its next iteration" in e
               for e in fired(result, "greedy_feedback"))
    assert result.verdict == GENAI and f"{kind} decoding in a generation loop" in result.explanation


def test_two_conv_model_alone_is_uncertain(tmp_path):
    nodes = [helper.make_node("Conv", ["feat", "w1"], ["a"], name="c1"),
             helper.make_node("Conv", ["a", "w2"], ["y"], name="c2")]
    result = _classify(tmp_path, nodes, [helper.make_tensor_value_info("feat", F, ["b", 16, 8, 8])],
                       [helper.make_tensor_value_info("y", F, None)], [_weight("w1", 8, 16, 3, 3),
                                                                       _weight("w2", 8, 8, 3, 3)], "two_conv")
    assert (result.verdict, result.margin, result.confidence) == (NON_GENAI, 4.0, "uncertain")
    assert result.explanation == "NonGenAI (uncertain, margin 4): a backbone of 2 conv layers."


def _positions_compared(tmp_path, right_input: str, name: str) -> Classification:
    """Token embeddings whose scores are masked by Range(seq) compared with ``right_input``."""
    nodes = [helper.make_node("Gather", ["wte", "input_ids"], ["x"], name="embed"),
             helper.make_node("Shape", ["input_ids"], ["shape"], start=1, end=2),
             helper.make_node("Squeeze", ["shape"], ["seq"]),
             helper.make_node("Range", ["zero", "seq", "one"], ["positions"], name="arange"),
             helper.make_node("Unsqueeze", ["positions", "axis0"], ["row"]),
             helper.make_node("Unsqueeze", [right_input, "axis1"], ["column"]),
             helper.make_node("Less", ["row", "column"], ["allowed"], name="mask"),
             helper.make_node("Where", ["allowed", "x", "neg"], ["masked"], name="apply")]
    inits = [_weight("wte", 300, 8), numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([0], np.int64), "axis0"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1"),
             numpy_helper.from_array(np.array(-1e9, np.float32), "neg")]
    inputs = [helper.make_tensor_value_info("input_ids", I64, ["b", "s"]),
              helper.make_tensor_value_info("lengths", I64, ["b"])]
    return _classify(tmp_path, nodes, inputs, [helper.make_tensor_value_info("masked", F, None)], inits, name)


def test_positions_against_lengths_are_a_padding_mask_not_a_causal_one(tmp_path):
    """Range(seq) < lengths is a padding mask; Range(seq) against the same positions laid out as a
    column is the query >= key comparison of a causal mask."""
    assert not fired(_positions_compared(tmp_path, "lengths", "padding"), "causal_mask")
    causal = fired(_positions_compared(tmp_path, "positions", "causal"), "causal_mask")
    assert any("compares positions from Range 'arange' and Range 'arange'" in e for e in causal)


def test_the_hand_written_family_members_are_what_their_builders_build():
    """``scripts/build_classifier_families.py`` rebuilds every committed ``built_*`` model byte for
    byte (seeded weights), so the graphs in the zoo are the patterns its code describes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_families", DATA.parent.parent / "scripts"
                                                  / "build_classifier_families.py")
    builders = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builders)
    committed = {p.name for p in (DATA / "families").glob("built_*.onnx")}
    assert committed == set(builders.BUILDERS)
    for name, build in builders.BUILDERS.items():
        assert build().SerializeToString() == (DATA / "families" / name).read_bytes(), name
