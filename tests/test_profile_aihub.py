"""The AI Hub import (``dashboard.profile.aihub``) and ``profile --aihub``: a file in the exact
schema the ``qai-hub`` client writes (``_profile_pb_to_python_dict`` of qai_hub/client.py, 0.56:
``execution_summary`` + ``execution_detail`` layers with ``name``, ``type``, ``compute_unit``,
optional ``execution_time`` µs and ``execution_cycles``), written here from that schema; layers
matched to the model's nodes through the usual renames, every unmatched one listed, a malformed or
mismatched file refused in one line with exit 2. No simulator: nothing is measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dashboard.cli.main import main

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "cnn_classifier.onnx"


def download_profile(layers: list[dict]) -> dict:
    """What ``ProfileJob.download_profile(filename)`` writes (major_version 1, minor 2)."""
    return {
        "execution_summary": {
            "estimated_inference_time": 812, "estimated_inference_peak_memory": 16711296,
            "first_load_time": 1374293, "first_load_peak_memory": 16711296, "warm_load_time": 277823,
            "warm_load_peak_memory": 16352051, "compile_time": 0, "compile_peak_memory": 0,
            "compile_memory_increase_range": [0, 0], "compile_memory_peak_range": [0, 0],
            "first_load_memory_increase_range": [7225886, 8203184], "first_load_memory_peak_range": [9823027, 10800324],
            "warm_load_memory_increase_range": [0, 0], "warm_load_memory_peak_range": [118784, 4322571],
            "inference_memory_increase_range": [0, 2658496], "inference_memory_peak_range": [2654208, 3940675],
            "all_compile_times": [1], "all_first_load_times": [1374293], "all_inference_times": [1003, 812, 790],
            "all_warm_load_times": [277823],
        },
        "execution_detail": layers,
    }


LAYERS = [
    {"compute_unit": "NPU", "execution_cycles": 180315, "execution_time": 127, "name": "Transpose_token_0", "type": "TRANSPOSE"},
    # the QNN converter's names: '/' and '.' made '_', a layout suffix, an output-tensor suffix
    {"compute_unit": "NPU", "execution_cycles": 90000, "execution_time": 64, "name": "_features_0_features_0_Conv", "type": "Conv2d"},
    {"compute_unit": "NPU", "execution_time": 50, "name": "/features.1/features.1/Conv_token_5", "type": "Conv2d"},
    {"compute_unit": "NPU", "execution_time": 3, "name": "/classifier/fc/Gemm_output_0", "type": "FullyConnected"},
    {"compute_unit": "CPU", "execution_time": 23, "name": "/classifier/Softmax", "type": "Softmax"},
    {"compute_unit": "NPU", "name": "_output_0_quantize", "type": "Quantize"},
]


def write(tmp_path: Path, data, name: str = "profile.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_a_downloaded_profile_lands_on_the_models_nodes_and_lists_what_does_not(tmp_path):
    from dashboard.profile.aihub import import_file

    profile = import_file(write(tmp_path, download_profile(LAYERS)), SAMPLE, "Samsung Galaxy S24")
    assert profile.source == "imported" and set(profile.backends) == {"htp", "cpu"}
    assert profile.backends["htp"].hardware == "AI Hub, Samsung Galaxy S24"
    assert profile.label("htp").startswith("µs measured on Samsung Galaxy S24 by AI Hub")
    assert profile.node("/features.0/features.0/Conv").median == 64
    assert profile.node("/features.1/features.1/Conv").median == 50
    assert profile.node("/classifier/fc/Gemm").op_type == "Gemm"
    softmax = profile.node("/classifier/Softmax")
    assert softmax.backend == "cpu" and softmax.share == pytest.approx(1.0)
    assert sorted(u.name for u in profile.unmatched) == ["Transpose_token_0", "_output_0_quantize"]
    htp = profile.backends["htp"]
    assert htp.total == 127 + 64 + 50 + 3 and any("2 of 6 layers" in n for n in htp.notes)
    assert {f.name: f.value for f in profile.summary}["estimated_inference_time"] == 812
    assert not htp.figures and not profile.backends["cpu"].figures  # whole-model figures once, not per backend
    assert profile.node("/features.0/features.0/Conv").cycles == 90000  # execution_cycles kept
    assert profile.runs == 3


def test_the_device_name_comes_from_the_file_when_it_says_and_else_asks(tmp_path):
    from dashboard.profile.aihub import import_file

    named = import_file(write(tmp_path, {**download_profile(LAYERS), "device": {"name": "Snapdragon 8 Elite QRD"}}),
                        SAMPLE)
    assert named.backends["htp"].hardware == "AI Hub, Snapdragon 8 Elite QRD"
    unnamed = import_file(write(tmp_path, download_profile(LAYERS)), SAMPLE)
    assert "--device-name" in unnamed.backends["htp"].hardware


@pytest.mark.parametrize("content, words", [
    ("not json", "not JSON"),
    ({"execution_summary": {}}, "execution_detail"),
    (download_profile([]), "no layers"),
    (download_profile([{"name": "x", "type": "Conv", "compute_unit": "TPU"}]), "compute_unit"),
    (download_profile([{"name": "x", "type": "Conv", "compute_unit": "NPU", "execution_time": "fast"}]), "µs"),
    (download_profile([{"name": "/other/model/Conv", "type": "Conv", "compute_unit": "NPU", "execution_time": 3}]),
     "another model"),
    ('{"execution_summary": {}, "execution_detail": [{"name": "/classifier/Softmax", "type": "Softmax", '
     '"compute_unit": "CPU", "execution_time": Infinity}]}', "µs"),
    ('{"execution_summary": {}, "execution_detail": [{"name": "/classifier/Softmax", "type": "Softmax", '
     '"compute_unit": "CPU", "execution_time": NaN}]}', "µs"),
])
def test_a_malformed_or_mismatched_file_is_one_line_and_exit_2(tmp_path, capsys, content, words):
    path = write(tmp_path, content)
    assert main(["profile", str(SAMPLE), "--aihub", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and words in err


def _one_short_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err[:300]
    assert len(err) < 300, f"{len(err)} characters: {err[:300]}"
    return err


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(tmp_path, capsys):
    """A file larger than ``MAX_FILE_BYTES`` (sparse here: it costs no disk) is refused from its
    first ``MAX_FILE_BYTES`` + 1 bytes, never parsed (before, a 300 MB one took 1.25 GB)."""
    from dashboard.profile import aihub

    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:
        handle.truncate(aihub.MAX_FILE_BYTES + 1)
    assert main(["profile", str(SAMPLE), "--aihub", str(path)]) == 2
    assert f"read up to {aihub.MAX_FILE_BYTES >> 20} MB" in _one_short_line(capsys)


def test_a_layer_name_over_the_cap_is_refused_in_a_short_line(tmp_path, capsys):
    """A 1 MB layer name (before: echoed whole into the "one-line" error, 314 MB of it for a
    300 MB name)."""
    from dashboard.profile import aihub

    huge = dict(LAYERS[1], name="/features.0/features.0/Conv" + "x" * (1 << 20))
    assert main(["profile", str(SAMPLE), "--aihub", str(write(tmp_path, download_profile([huge])))]) == 2
    assert f"at most {aihub.MAX_TEXT}" in _one_short_line(capsys)
    long_type = dict(LAYERS[1], type="T" * (aihub.MAX_TEXT + 1))
    assert main(["profile", str(SAMPLE), "--aihub", str(write(tmp_path, download_profile([long_type])))]) == 2
    assert "execution_detail[0].type" in _one_short_line(capsys)


def test_more_layers_than_the_cap_are_refused(tmp_path, capsys):
    from dashboard.profile import aihub

    layers = [{"name": f"n{i}", "type": "Conv", "compute_unit": "NPU"} for i in range(aihub.MAX_LAYERS + 1)]
    assert main(["profile", str(SAMPLE), "--aihub", str(write(tmp_path, download_profile(layers)))]) == 2
    assert f"{aihub.MAX_LAYERS + 1} layers" in _one_short_line(capsys)


def test_what_an_error_quotes_from_the_file_is_cut_short(tmp_path, capsys):
    """Another model's profile whose first layer has a long (allowed) name, under a long file name:
    the error quotes the start of one and the end of the other."""
    from dashboard.profile import aihub

    name = "/other/model/" + "y" * (aihub.MAX_TEXT - 20)
    folder = tmp_path / ("d" * 150)
    folder.mkdir()
    path = write(folder, download_profile([{"name": name, "type": "Conv", "compute_unit": "NPU"}]))
    assert main(["profile", str(SAMPLE), "--aihub", str(path)]) == 2
    err = _one_short_line(capsys)
    assert "another model" in err and "/other/model/yyy" in err and "profile.json" in err


def test_a_long_device_name_is_cut_in_the_label(tmp_path):
    from dashboard.profile import aihub
    from dashboard.profile.aihub import import_file

    named = import_file(write(tmp_path, {**download_profile(LAYERS), "device": "S" * (1 << 20)}), SAMPLE)
    assert len(named.backends["htp"].hardware) <= aihub.MAX_TEXT + len("AI Hub, ")


def test_the_cli_shows_an_import_with_its_unmatched_count_and_json(tmp_path, capsys):
    path = write(tmp_path, download_profile(LAYERS))
    assert main(["profile", str(SAMPLE), "--aihub", str(path), "--device-name", "Galaxy S24"]) == 0
    out = capsys.readouterr().out
    assert "µs measured on Galaxy S24 by AI Hub" in out and "2 layer(s) of the file match no node" in out
    assert "cycles" not in out.split("\n", 1)[1].replace("execution_cycles", "")
    assert main(["profile", str(SAMPLE), "--aihub", str(path), "--json", "--csv", str(tmp_path / "n.csv")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "imported" and len(data["unmatched"]) == 2
    for node in data["nodes"]:
        assert {"name", "op_type", "backend", "unit", "median", "share"} <= set(node)
    assert (tmp_path / "n.csv").read_text().startswith("name,op_type,backend,unit,median")


def test_bad_arguments_are_one_line_before_anything_runs(tmp_path, capsys):
    for argv in (["profile", str(SAMPLE), "--runs", "0"], ["profile", str(tmp_path / "missing.onnx"), "--aihub",
                                                            str(write(tmp_path, download_profile(LAYERS)))],
                 ["profile", str(SAMPLE), "--device-name", "x"]):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's own errors (the project's Parser: one line, exit 2)
            code = stop.code
        assert code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and len(err.splitlines()) == 1


def test_the_html_report_has_a_profile_section_that_never_shows_simulated_cycles_as_time():
    import sys as _sys

    from dashboard.intake.reader import load_model
    from dashboard.render.report import ReportInput, build_html

    _sys.path.insert(0, str(Path(__file__).resolve().parent))
    from profile_fixtures import aihub_profile, cnn_profile

    document = build_html(ReportInput("cnn", str(SAMPLE), "0" * 32, load_model(SAMPLE),
                                      profiles=[cnn_profile(), aihub_profile("Galaxy S24")]))
    section = document.split("<section id='profile'>")[1].split("</section>")[0]
    assert "<h2>Where the time goes</h2>" in document
    assert "Simulated cycles are not time" in section and "simulated HTP cycles" in section
    assert "inserted by the runtime for /features.0/features.0/Conv" in section
    assert "µs measured on Galaxy S24 by AI Hub" in section and "1 layer(s) of the imported file" in section
    assert "FAILED" not in section and "failed" in section  # the GPU's row says it failed, with its reason
    without = build_html(ReportInput("cnn", str(SAMPLE), "0" * 32, load_model(SAMPLE)))
    assert "id='profile'" not in without


def test_against_an_earlier_profile_shows_what_changed_and_refuses_a_file_that_is_not_one(tmp_path, capsys):
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parent))
    from profile_fixtures import cnn_profile

    earlier = write(tmp_path, cnn_profile().to_json(), "earlier.json")
    path = write(tmp_path, download_profile(LAYERS))
    assert main(["profile", str(SAMPLE), "--aihub", str(path), "--device-name", "S24", "--against", str(earlier)]) == 0
    out = capsys.readouterr().out
    assert "compared with" in out and "HTP: then simulated HTP cycles, now µs measured on S24 by AI Hub" in out
    assert main(["profile", str(SAMPLE), "--aihub", str(path), "--against", str(earlier), "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)["compared"]["htp"]
    conv = next(r for r in compared["name"] if r["name"] == "/features.0/features.0/Conv")
    assert conv["ratio"] is None  # cycles against µs: never divided
    assert main(["profile", str(SAMPLE), "--aihub", str(path), "--against", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1


def test_an_older_clients_compute_unit_names_are_read_and_an_unknown_unit_is_no_cpu_fallback(tmp_path, capsys):
    from dashboard.profile.aihub import import_file

    older = [{**layer, "compute_unit": f"COMPUTE_UNIT_{layer['compute_unit']}"} for layer in LAYERS]
    older.append({"compute_unit": "COMPUTE_UNIT_UNSPECIFIED", "execution_time": 7,
                  "name": "/classifier/GlobalAveragePool", "type": "Mean"})
    profile = import_file(write(tmp_path, download_profile(older)), SAMPLE, "Galaxy S24")
    assert profile.node("/features.0/features.0/Conv").median == 64
    assert profile.node("/classifier/Softmax").backend == "cpu"
    pool = profile.node("/classifier/GlobalAveragePool")
    assert pool.backend == "unspecified" and "CPU" not in profile.label("unspecified")
    assert profile.label("cpu").endswith("by AI Hub (CPU)") and "CPU EP" not in profile.label("cpu")
    from dashboard.render.model_explorer import FALLBACK_OVERLAY, cost_overlays
    from dashboard.intake.reader import load_model

    fallback = cost_overlays(load_model(SAMPLE), profile)[FALLBACK_OVERLAY].results
    assert len(fallback) == 1  # the Softmax only: a layer of no known unit is not drawn as CPU fallback
    assert main(["profile", str(SAMPLE), "--aihub", str(write(tmp_path, download_profile(older))),
                 "--device-name", "S24"]) == 0
    out = capsys.readouterr().out
    assert out.count("estimated_inference_time") == 1  # the whole model's figures once, not under each backend


@pytest.mark.parametrize("flags", [["--runs", "3"], ["--fp16"], ["--soc", "60"], ["--device", "ssh://u@h"],
                                   ["--option", "htp_performance_mode=burst"]])
def test_measuring_flags_with_an_import_are_refused_not_ignored(tmp_path, capsys, flags):
    path = write(tmp_path, download_profile(LAYERS))
    assert main(["profile", str(SAMPLE), "--aihub", str(path), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and flags[0] in err and "--aihub" in err


def test_an_against_file_with_nan_is_one_line(tmp_path, capsys):
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parent))
    from profile_fixtures import cnn_profile

    data = cnn_profile().to_json()
    data["nodes"][0]["share"] = float("nan")
    earlier = write(tmp_path, json.dumps(data), "earlier.json")
    assert main(["profile", str(SAMPLE), "--aihub", str(write(tmp_path, download_profile(LAYERS))),
                 "--against", str(earlier)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "finite" in err


def test_the_html_report_shows_ai_hubs_whole_model_figures_once():
    """The whole-model figures (estimated inference time, load times) belong to no backend: the
    report's profile section shows each once, under "Whole model"."""
    from dataclasses import replace

    from dashboard.profile.model import Figure
    from dashboard.render.report import _profile
    from profile_fixtures import aihub_profile

    imported = replace(aihub_profile(), summary=[Figure("estimated_inference_time", 1234.0, "us")])
    html = _profile(imported)
    assert "Whole model" in html and html.count("estimated_inference_time") == 1 and "1,234 us" in html
    assert "Whole model" not in _profile(replace(imported, summary=[]))
