"""The predicted GPU rule table: each rule's verdict, reason and source."""

from __future__ import annotations

import pytest

from dashboard.partition import gpu_rules
from dashboard.partition.gpu_rules import NodeFacts, TensorFacts, predict, predict_node


def t(name: str, shape=(1, 8), dtype: str = "float32", constant: bool = False) -> TensorFacts:
    return TensorFacts(name, dtype, shape, constant)


def k(name: str, value: float) -> TensorFacts:
    """A one-element constant."""
    return TensorFacts(name, "float32", (), True, value)


def node(op: str, inputs=(), outputs=(), domain: str = "", **attrs) -> NodeFacts:
    return NodeFacts(f"{op}_node", op, domain, attrs, tuple(inputs), tuple(outputs) or (t("out"),))


@pytest.mark.parametrize("bits,block,ok,needle", [
    (4, 32, True, None), (4, 16, False, "block_size=16"), (4, 64, False, "block_size=64"), (8, 32, False, "bits=8"),
])
def test_matmulnbits_follows_the_ep_gpu_constraints(bits, block, ok, needle):
    p = predict_node(node("MatMulNBits", [t("a", (1, 1, 64)), t("b", (64, 2, 16), "uint8", True)],
                          domain="com.microsoft", bits=bits, block_size=block, K=64, N=64))
    assert p.supported is ok
    assert p.source == "ep-matmulnbits"
    if ok:
        assert p.qnn_op == "FullyConnected"
    else:
        assert needle in p.reason


def test_mod_with_fmod_is_refused_as_the_ep_does_before_any_backend():
    p = predict_node(node("Mod", [t("a"), t("b")], fmod=1))
    assert (p.supported, p.source) == (False, "ep-mod") and "fmod == 0" in p.reason
    assert predict_node(node("Mod", [t("a"), t("b")], fmod=0)).supported


def gelu(root_half: bool, sqrt2: float = 2 ** 0.5) -> list[NodeFacts]:
    """x / sqrt(2) -> Erf -> + 1 -> * x -> * 0.5 (``root_half``: 0.5 * x first, the other form)."""
    x = t("x")
    nodes = [NodeFacts("div", "Div", "", {}, (x, k("s2", sqrt2)), (t("d"),)),
             NodeFacts("erf", "Erf", "", {}, (t("d"),), (t("e"),)),
             NodeFacts("add", "Add", "", {}, (t("e"), k("one", 1.0)), (t("a"),))]
    if root_half:
        nodes += [NodeFacts("half", "Mul", "", {}, (x, k("h", 0.5)), (t("hx"),)),
                  NodeFacts("mul", "Mul", "", {}, (t("hx"), t("a")), (t("y"),))]
    else:
        nodes += [NodeFacts("mul", "Mul", "", {}, (x, t("a")), (t("m"),)),
                  NodeFacts("half", "Mul", "", {}, (t("m"), k("h", 0.5)), (t("y"),))]
    return nodes


@pytest.mark.parametrize("root_half", [True, False])
def test_the_eps_gelu_fusion_is_recognised_from_the_graph(root_half):
    predictions = predict(gelu(root_half))
    assert all(p.supported for p in predictions.values())
    assert predictions["erf"].qnn_op == gpu_rules.GELU_QNN_OP and predictions["erf"].source == "ep-fusions"


def test_an_erf_outside_the_pattern_is_refused():
    assert not predict(gelu(True, sqrt2=2.0))["erf"].supported  # x / 2 is not the GELU's x / sqrt(2)
    alone = predict_node(node("Erf", [t("x")]))
    assert not alone.supported and "not in the QNN GPU rule table" in alone.reason
    dynamic = predict([n if n.name != "erf" else NodeFacts("erf", "Erf", "", {}, (t("d"),), (t("e", ("n", 8)),))
                       for n in gelu(True)])
    assert not dynamic["erf"].supported and dynamic["erf"].reason.startswith("Cannot get shape")


def test_group_query_attention_is_claimed_on_gpu():
    p = predict_node(node("GroupQueryAttention", [t("q", (1, 1, 64))], domain="com.microsoft"))
    assert p.supported and p.source == "ep-gqa"


def test_gpu_specific_refusals():
    cases = [
        (node("NonMaxSuppression", [t("boxes", (1, 4, 4))]), "not supported on QNN GPU", "ep-nms"),
        (node("Conv", [t("x", (1, 1, 3, 3, 3)), t("w", (2, 1, 2, 2, 2), constant=True)]), "3D Conv", "ep-gpu-tests"),
        (node("Conv", [t("x", (1, 6, 3, 3)), t("w", (2, 3, 2, 2), constant=True)], group=2), "groups of 3",
         "ep-gpu-tests"),
        (node("Clip", [t("x", dtype="int32")]), "int32", "ep-gpu-tests"),
        (node("Pad", [t("x", (1, 3, 8))], mode="reflect"), "MIRROR_REFLECT", "ep-gpu-tests"),
        (node("Einsum", [t("a", (1, 2, 3, 4)), t("b", (3, 5, 4))], equation="bhwc,wkc->bhwk"), "on backend GPU",
         "ep-einsum"),
        (node("MatMul", [t("a", (1, 3, 3)), t("b", (3, 3, 2), constant=True)]), "broadcasting a batch",
         "ep-gpu-tests"),
        (node("RotaryEmbedding", [t("x")], domain="com.microsoft"), "com.microsoft.RotaryEmbedding", "ep-rotary"),
        (node("QuantizeLinear", [t("x")]), "float activations", "ep-docs-gpu"),
        (node("DequantizeLinear", [t("q", dtype="uint8")]), "quantized activation", "ep-docs-gpu"),
        (node("Add", [t("q", dtype="uint16"), t("k", dtype="uint16", constant=True)]), "float activations",
         "qnn-gpu-overview"),
        (node("LpPool", [t("x", (1, 2, 4, 4, 4))]), "LpPool", "ep-lppool"),
    ]
    for facts, needle, source in cases:
        p = predict_node(facts)
        assert not p.supported, facts.op_type
        assert needle in p.reason and p.source == source, (facts.op_type, p)


def test_supported_neighbours_of_the_refusals():
    assert predict_node(node("Conv", [t("x", (1, 4, 3, 3)), t("w", (2, 2, 2, 2), constant=True)], group=2)).supported
    assert predict_node(node("Einsum", [t("a", (2, 3, 4)), t("b", (2, 4, 5))], equation="bij,bjk->bik")).supported
    assert predict_node(node("MatMul", [t("a", (3, 3, 3)), t("b", (1, 3, 2), constant=True)])).supported
    assert predict_node(node("Pad", [t("x", (1, 3, 8, 8))], mode="reflect")).supported
    assert predict_node(node("DequantizeLinear", [t("w", dtype="uint8", constant=True)])).supported


def test_environment_refusals_come_first():
    custom = predict_node(node("MyOp", [t("x")], domain="my.domain"))
    assert not custom.supported and "custom op domain" in custom.reason
    loop = NodeFacts("loop", "Loop", "", {}, (t("x"),), (t("y"),), subgraphs=1)
    assert "control-flow" in predict_node(loop).reason
    dynamic = predict_node(node("Relu", [t("x", ("batch", 8))]))
    assert not dynamic.supported and dynamic.reason.startswith("Cannot get shape")
    unknown_shape = predict_node(node("Relu", [t("x", None)]))  # a tensor ORT created: no evidence
    assert unknown_shape.supported


def test_every_rule_cites_a_known_source():
    for rule in gpu_rules.GPU_OPS.values():
        assert rule.source in gpu_rules.SOURCES
        assert all(source in gpu_rules.SOURCES for _, source in rule.checks)
    for _, source in gpu_rules.GPU_UNSUPPORTED.values():
        assert source in gpu_rules.SOURCES
    rows = gpu_rules.rule_table()
    assert len(rows) == len(gpu_rules.GPU_OPS) + len(gpu_rules.GPU_UNSUPPORTED)
    assert all(row["source"] for row in rows)
    assert {r["confidence"] for r in rows} == {gpu_rules.DOCUMENTED, gpu_rules.ASSUMED}
