"""Issue 17 items 6 and 12: one definition of "claims" for the headline and the classes, and the
nodes that keep a model off the NPU grouped by op and reason with the fix to try.

Reports are built here by hand (no session): a few refusals as the QNN EP words them, and two
Transposes ONNX Runtime removed before partitioning that the predicted GPU column still "takes".
"""

from __future__ import annotations

import io
import json

import pandas as pd
from streamlit.testing.v1 import AppTest

from dashboard.cli.partition import render_text
from dashboard.partition.blockers import RULES, blockers, fix_for, pattern
from dashboard.partition.report import (BackendReport, NodeSupport, PartitionReport, claims, classify_nodes,
                                        parse_device_report)
from dashboard.runtime.knobs import CLI, PAGE, Settings, words

AFFINITY = "GroupQueryAttention filtered off QNN by the op_affinity provider option."


def report() -> PartitionReport:
    """10 nodes: 2 removed by ORT (HTP says removed, the predicted GPU says it takes them), 3
    claimed by both, 2 MatMulInteger, 2 Gathers refused with "Failed to add node", 1 GQA."""
    htp, gpu = {}, {}
    names = []

    def node(name, op, on_htp, on_gpu, reason=None, status=None):
        names.append(name)
        htp[name] = NodeSupport(op, on_htp, None if on_htp else reason,
                                status=status or ("claimed" if on_htp else "rejected"))
        gpu[name] = NodeSupport(op, on_gpu, None if on_gpu else "GPU: no", status="predicted")

    node("t0", "Transpose", False, True, status="removed")
    node("t1", "Transpose", False, True, status="removed")
    for i in range(3):
        node(f"conv{i}", "Conv", True, True)
    node("mm0", "MatMulInteger", False, False, "MatMulInteger is not supported.")
    node("mm1", "MatMulInteger", False, False, "MatMulInteger is not supported.")
    node("embed/Gather_12", "Gather", False, True, "Failed to add node embed/Gather_12 (QNN error 3110)")
    node("pos/Gather_7", "Gather", False, True, "Failed to add node pos/Gather_7 (QNN error 3110)")
    node("attn", "GroupQueryAttention", False, True, AFFINITY)
    h = BackendReport("htp", "measured", nodes=htp)
    g = BackendReport("gpu", "predicted", nodes=gpu)
    return PartitionReport("m.onnx", "d" * 64, Settings(), {"htp": h, "gpu": g}, classify_nodes(names, h, g), {},
                           node_order=names, op_types={n: htp[n].op_type for n in names})


def test_the_headline_claims_equal_the_classes_and_removed_nodes_are_counted_apart():
    r = report()
    counts = r.classes.counts()
    gpu, htp = claims(r, "gpu"), claims(r, "htp")
    assert counts["removed"] == 2 and gpu.removed == 2 == htp.removed
    assert gpu.claimed == counts["both"] + counts["gpu_only"] == 6  # not 8: the removed Transposes run nowhere
    assert htp.claimed == counts["both"] + counts["htp_only"] == 3
    assert gpu.executed == htp.executed == len(r.node_order) - 2


def test_the_page_headline_and_the_cli_say_the_classes_numbers():
    r = report()

    def script(data):
        from dashboard.partition.report import PartitionReport
        from dashboard.views.partitions import _backend_status

        _backend_status(PartitionReport.from_json(data))

    at = AppTest.from_function(script, args=(r.to_json(),)).run()
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "predicted to claim **6 of 8** executed nodes" in text and "2 removed by ONNX Runtime" in text
    assert "claims **3 of 8**" in text
    lines = "\n".join(render_text(r))
    assert "would claim 6/8 nodes" in lines and "refuses 2; 2 removed" in lines


def test_refusals_are_grouped_by_op_and_reason_with_a_fix_each():
    rows = {(b.op_type, b.rule): b for b in blockers(report())}
    assert set(rows) == {("MatMulInteger", "dynamic_quant"), ("Gather", "op_validation"),
                         ("GroupQueryAttention", "op_affinity_default")}
    gather = rows["Gather", "op_validation"]
    assert gather.count == 2 and gather.examples == ["embed/Gather_12", "pos/Gather_7"]  # one pattern: names, numbers
    assert gather.reason == "Failed to add node <node> (QNN error N)" and gather.gpu_takes == 2
    mm = rows["MatMulInteger", "dynamic_quant"]
    assert mm.count == 2 and "QDQ" in mm.fix and mm.gpu_takes == 0
    assert [b.count for b in blockers(report())] == sorted((b.count for b in blockers(report())), reverse=True)
    assert all(b.op_type != "Transpose" for b in rows.values())  # removed nodes block nothing


def test_the_op_affinity_reason_is_explained_as_the_eps_default_and_how_to_change_it():
    rule, fix = fix_for("GroupQueryAttention", AFFINITY)
    assert rule == "op_affinity_default"
    assert "default" in fix and "opt-in on the HTP" in fix and "op_affinity=PATH" in fix and '"htp"' in fix
    assert "--backends" in words(fix, CLI) and "⟨" not in words(fix, PAGE)


def test_every_rule_is_reachable_and_unknown_reasons_say_so():
    for rule in RULES:  # each rule's own example wins over the ones after it
        sample = {"dynamic_quant": ("MatMulInteger", "x"), "op_affinity_default": ("X", AFFINITY),
                  "op_affinity_pinned": ("X", "op_affinity pins it to a backend this session is not running"),
                  "shape": ("Add", "Cannot get shape of input 0"),
                  "integer_data": ("Gather", "uint8 data: Failed to add node"),
                  "op_validation": ("Gather", "Failed to add node"), "float32": ("Add", "float32 input"),
                  "int64": ("Add", "int64 input"), "no_builder": ("Foo", "no builder for Foo"),
                  "left_on_cpu": ("Add", "the EP validated this node but did not claim it (left on CPU)")}
        assert fix_for(*sample[rule.key])[0] == rule.key
    assert fix_for("Foo", "something new") == ("", fix_for("Foo", "something new")[1])
    assert pattern("node a/b_3 has 'x_1' rank 5", "a/b_3") == "node <node> has '…' rank N"


def test_an_op_type_refused_as_such_gets_the_no_builder_fix_whatever_its_name_says():
    """Issue 27, item 3's rule for the blockers too: "Operators of type `DynamicTimeWarping` are not
    supported" is the op type refused (replace it), not "a size known only at run time"."""
    for op in ("DynamicTimeWarping", "Erf", "DynamicSlice"):
        reason = f"Operators of type `{op}` are not supported by QNN EP.{op} node `/dynamic/{op}_3` will not be assigned"
        assert fix_for(op, reason)[0] == "no_builder", op
    assert fix_for("Shape", "Cannot get shape")[0] == "shape"  # a reason's own shape words still count
    assert fix_for("Range", "Dynamic Range inputs are not supported by QNN EP.")[0] == "shape"


def test_no_fix_says_to_turn_on_fp16_when_the_analysis_ran_with_it():
    """Issue 27, item 6: an int8 CRNN analysed with fp16 on was told "or keep the float model and
    turn on fp16". Every rule's fix, for a report made with fp16 on, says it is on instead."""
    import dataclasses

    off, on = report(), dataclasses.replace(report(), options=Settings(fp16=True))
    mm_off = next(b for b in blockers(off) if b.rule == "dynamic_quant")
    mm_on = next(b for b in blockers(on) if b.rule == "dynamic_quant")
    assert "turn on ⟨fp16⟩" in mm_off.fix and "turn on" not in mm_on.fix and "is on already" in mm_on.fix
    assert "QDQ" in mm_on.fix  # the rest of the fix stands
    for rule in RULES:
        if "fp16" in rule.fix:
            fix = fix_for(*{"dynamic_quant": ("MatMulInteger", "x"), "integer_data": ("Gather", "uint8 data: Failed to add node"),
                            "op_validation": ("Gather", "Failed to add node"),
                            "float32": ("Add", "float32 input")}[rule.key], fp16=True)[1]
            assert "turn on ⟨fp16⟩" not in fix and "needs ⟨fp16⟩" not in fix and "⟨fp16⟩" in fix, rule.key


def test_the_json_carries_the_blockers_and_reads_back_as_a_device_report():
    data = report().to_json()
    assert {b["op_type"] for b in data["blockers"]} == {"MatMulInteger", "Gather", "GroupQueryAttention"}
    again = parse_device_report(json.dumps(data))  # a derived field: written, ignored when read
    assert claims(again, "gpu").claimed == 6


def test_the_cli_text_lists_the_groups_with_fixes_in_its_words():
    lines = "\n".join(render_text(report()))
    assert "blockers by op and reason (3 group(s))" in lines
    assert "2x Gather: Failed to add node <node> (QNN error N)" in lines and "⟨" not in lines


def test_the_page_groups_the_blockers_and_offers_both_csvs():
    def script(data):
        from dashboard.partition.report import PartitionReport
        from dashboard.views.partitions import _off_npu

        _off_npu(PartitionReport.from_json(data))

    at = AppTest.from_function(script, args=(report().to_json(),)).run()
    assert not at.exception
    assert "5 node(s) keep the model off the NPU" in at.subheader[0].value  # not the removed Transposes
    groups = at.dataframe[0].value
    assert list(groups["nodes"]) == [2, 2, 1] and "QDQ" in " ".join(groups["fix to try"])
    assert not any("⟨" in f for f in groups["fix to try"])
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download the blockers (CSV)", "Download these nodes (CSV)"]
    nodes = at.dataframe[1].value
    assert set(nodes["node"]) == {"mm0", "mm1", "embed/Gather_12", "pos/Gather_7", "attn"}
    csv = pd.read_csv(io.StringIO(blockers_csv(report())))
    assert list(csv["nodes"]) == [2, 2, 1]


def blockers_csv(r: PartitionReport) -> str:
    from dashboard.partition.blockers import csv_rows

    return pd.DataFrame(csv_rows(blockers(r))).to_csv(index=False)
