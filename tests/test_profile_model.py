"""The profile record (``dashboard.profile.model``): its JSON round trip, its checks, its tables and
labels, on the hand-built fixtures of ``tests/profile_fixtures.py`` (no simulator)."""

from __future__ import annotations

import json

import pytest

from dashboard.profile.model import Profile, cut_scope, scope_of, spread
from dashboard.serde import SchemaError, loads
from profile_fixtures import aihub_profile, cnn_profile


def test_a_profile_survives_json_and_refuses_a_wrong_shape():
    profile = cnn_profile()
    assert Profile.from_json(json.loads(json.dumps(profile.to_json()))) == profile
    data = profile.to_json()
    data["nodes"][0]["median"] = "lots"
    with pytest.raises(SchemaError, match=r"nodes\[0\]\.median"):
        Profile.from_json(data)
    data = profile.to_json()
    data["backends"]["gpu"]["reason"] = None
    with pytest.raises(SchemaError, match="says why"):
        Profile.from_json(data)
    data = profile.to_json()
    del data["backends"]["cpu"]
    with pytest.raises(SchemaError, match="cpu"):
        Profile.from_json(data)
    with pytest.raises(SchemaError, match="schema"):
        loads(Profile, json.dumps({**profile.to_json(), "schema": "other/1"}))


def test_shares_sum_per_backend_and_tables_keep_every_row():
    profile = cnn_profile()
    frame = profile.frame()
    assert len(frame) == len(profile.nodes)
    for backend, b in profile.backends.items():
        rows = frame[frame.backend == backend]
        if b.ok:
            assert rows["median"].sum() == pytest.approx(b.total)
            assert rows["share"].sum() == pytest.approx(1.0)
    ops = profile.by_op_type("htp")
    assert ops.iloc[0]["op_type"] == "Transpose"  # the inserted layout transpose is the costliest here
    assert ops["nodes"].sum() == len(profile.backend_nodes("htp"))
    blocks = profile.by_scope(1, "htp")
    assert blocks["median"].sum() == pytest.approx(profile.backends["htp"].total)
    assert blocks.iloc[0]["scope"] == "/features.0"  # the transpose counts in the block it serves


def test_fused_groups_and_inserted_rows():
    profile = cnn_profile()
    conv = profile.node("/features.0/features.0/Conv")
    assert conv.carrier and conv.members[0] == conv.name and "/features.0/features.0/Relu" in conv.members
    relu = profile.node("/features.0/features.0/Relu")
    assert relu.fused and relu.group == conv.name and relu.median == 0
    transpose = profile.node("Transpose")
    assert transpose.inserted and transpose.serves == "/features.0/features.0/Conv"
    assert [n.name for n in profile.top(1, "htp")] == ["Transpose"]


def test_labels_never_call_simulated_cycles_time():
    profile = cnn_profile()
    assert profile.label("htp") == "simulated HTP cycles"
    assert "µs" in profile.label("cpu")
    imported = aihub_profile("Galaxy S24")
    assert imported.label("htp").startswith("µs measured on Galaxy S24 by AI Hub")
    assert imported.unmatched and imported.unmatched[0].name


def test_scopes_and_spread():
    assert scope_of("/encoder/layer.0/attention/MatMul") == "/encoder/layer.0/attention"
    assert scope_of("Transpose") == ""
    assert cut_scope("/encoder/layer.0/attention", 2) == "/encoder/layer.0"
    s = spread([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s["median"], s["min"], s["max"], s["p10"], s["p90"]) == (3.0, 1.0, 5.0, 1.0, 5.0)


def test_two_profiles_compare_per_node_and_op_type_and_never_divide_cycles_by_microseconds():
    from dashboard.profile.model import compare

    fp32, fp16 = cnn_profile(), cnn_profile()
    transpose = fp16.node("Transpose")
    transpose.median /= 2
    transpose.share = transpose.median / fp16.backends["htp"].total
    by_node = compare(fp32, fp16)
    row = by_node[by_node.name == "Transpose"].iloc[0]
    assert row.ratio == pytest.approx(0.5) and row.share_change < 0
    assert by_node.iloc[0]["name"] == "Transpose"  # the largest change first
    by_op = compare(fp32, fp16, by="op_type")
    assert set(by_op.op_type) == {"Transpose", "Conv+BatchNormalization+Relu", "GlobalAveragePool", "Flatten", "Gemm"}
    imported = aihub_profile()
    mixed = compare(fp32, imported)  # simulated cycles against AI Hub's µs: shares only
    assert mixed.ratio.isna().all() and mixed.attrs["b"].startswith("µs measured on")
    assert len(fp32.index()) == len(fp32.nodes)  # (name, backend) is unique


def test_the_overlay_colours_a_fused_member_by_its_groups_cost_and_hangs_inserted_rows_on_their_node():
    profile = cnn_profile()
    overlay = profile.overlay()
    conv, relu = overlay["/features.0/features.0/Conv"], overlay["/features.0/features.0/Relu"]
    assert relu["share"] == 0 and relu["group_share"] == conv["share"] > 0
    assert [i["name"] for i in conv["inserted"]] == ["Transpose"]
    assert "Transpose" not in overlay
    assert overlay["/classifier/Softmax"]["backend"] == "cpu" and overlay["/classifier/Softmax"]["unit"] == "us"


def test_a_fused_groups_cost_is_summed_under_its_members_op_types_never_on_its_relu():
    profile = cnn_profile()
    ops = profile.by_op_type("htp").set_index("op_type")
    groups = [n for n in profile.backend_nodes("htp") if n.carrier]
    assert ops.loc["Conv+BatchNormalization+Relu", "median"] == pytest.approx(sum(n.median for n in groups))
    assert ops.loc["Conv+BatchNormalization+Relu", "nodes"] == 3 * len(groups)
    assert not {"Relu", "Conv", "BatchNormalization"} & set(ops.index)  # no costly Relu beside a "free" Conv
    from dashboard.profile.model import summaries

    (title, rows), _ = summaries(profile.backend_nodes("htp"))
    assert title == "op types" and "Conv+BatchNormalization+Relu" in [r[0] for r in rows]


def test_no_ratio_between_figures_of_different_hardware_in_the_same_unit():
    from dashboard.profile.model import compare

    simulated, device = cnn_profile(), cnn_profile()
    device.backends["htp"].hardware = "Snapdragon 8 Gen 3 NPU"
    frame = compare(simulated, device)
    assert frame.ratio.isna().all() and "different hardware" in frame.attrs["no_ratio"]
    phone_cpu = cnn_profile()
    phone_cpu.backends["cpu"].hardware = "AI Hub, Galaxy S24"
    assert compare(simulated, phone_cpu, "cpu").ratio.isna().all()
    same = compare(simulated, cnn_profile())
    assert same.attrs["no_ratio"] is None and (same.ratio.dropna() == 1.0).all() and same.ratio.notna().any()


@pytest.mark.parametrize("where", ["nodes", "backends", "share"])
def test_a_profile_with_nan_or_infinity_is_refused_in_one_line(where):
    data = cnn_profile().to_json()
    if where == "nodes":
        data["nodes"][1]["median"] = float("nan")
    elif where == "backends":
        data["backends"]["htp"]["total"] = float("inf")
    else:
        data["nodes"][0]["share"] = float("nan")
    with pytest.raises(Exception, match="not a finite number") as caught:
        loads(Profile, json.dumps(data), "earlier.json")
    assert "\n" not in str(caught.value)
