"""Shared test fixtures: the dashboard under ``streamlit.testing.v1.AppTest`` and models to feed it.

``app(*script_args)`` builds an AppTest of ``app.py`` as ``streamlit run app.py -- *script_args``
would start it (the script reads ``sys.argv``, which AppTest shares with the test process).
Streamlit's resource caches are process-wide, so each test using ``app`` starts with them cleared.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

APP_TIMEOUT = 60.0  # seconds per AppTest run; generous for a shared 2-core machine


@pytest.fixture(autouse=True)
def _operator_config_per_test():
    """Each test reads the operator's config (``dashboard.access``) afresh: one that sets
    ``QNN_LAB_*`` variables with monkeypatch leaves nothing behind for the next."""
    from dashboard import access

    access.reload()
    yield
    access.reload()


@pytest.fixture
def app(monkeypatch):
    """Factory: ``app("--model", path)`` -> an AppTest of app.py (not yet run). Streamlit is
    imported here, not at collection, so tests of the Streamlit-free CLI never load it."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    st.cache_data.clear()

    def make(*script_args: str, timeout: float = APP_TIMEOUT) -> AppTest:
        monkeypatch.setattr(sys, "argv", [str(ROOT / "app.py"), *script_args])
        return AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)

    return make


@pytest.fixture
def assert_markdown_escaped():
    """Checker for text that Streamlit renders as markdown: no ``<`` that is not backslash-escaped
    (an unescaped one could open an HTML tag) and no unescaped markdown link."""

    def check(elements) -> None:
        for element in elements:
            text = element.value
            assert not re.search(r"(?<!\\)<", text), text[:300]
            assert not re.search(r"(?<!\\)\]\(", text), text[:300]

    return check


@pytest.fixture(scope="session")
def decoder_20k(tmp_path_factory) -> Path:
    """A GPT-2-style decoder of about 20,000 nodes (the benchmark's generator), written once."""
    import onnx

    from dashboard.intake.samples import build_decoder

    path = tmp_path_factory.mktemp("big") / "decoder_20k.onnx"
    onnx.save(build_decoder(20_000), path)
    return path


@pytest.fixture
def hostile_model(tmp_path) -> Path:
    """A model whose node, input and output names are HTML, script, 10k characters, non-ASCII."""
    import zoo

    return zoo.save(zoo.hostile_names(), tmp_path)


HOSTILE_INPUT = "<img src=x onerror=window.__pwned=1>"


@pytest.fixture
def hostile_layernorm_model(tmp_path) -> Path:
    """LayerNormalization nodes named like an attacker would (HTML, script, 10k characters,
    non-ASCII, control characters) behind an input named ``HOSTILE_INPUT``: with LayerNorm at
    100% density the names are classifier evidence, so every page has to show them."""
    import onnx
    import zoo
    from onnx import TensorProto, helper

    nodes, x = [], HOSTILE_INPUT
    for i, name in enumerate(n for n in zoo.HOSTILE_NAMES if n):
        nodes.append(helper.make_node("LayerNormalization", [x, "scale"], [f"y{i}"], name=name, axis=-1))
        x = f"y{i}"
    graph = helper.make_graph(nodes, "hostile", [helper.make_tensor_value_info(HOSTILE_INPUT, TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor("scale", TensorProto.FLOAT, [4], [1.0] * 4)])
    path = tmp_path / f"{HOSTILE_INPUT}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


# -- test tiers -------------------------------------------------------------------------------------------
# Every test is marked here, in one place, by what it starts (markers registered in pyproject.toml):
#   browser    a real dashboard server (``streamlit run``) and/or Chromium (tests/e2e_helpers.py)
#   board      the emulated arm64 board (tests/test_board.py)
#   simulator  compiles graphs on the HTP simulator (or a worker doing it)
#   ssh        the loopback sshd fixture
#   slow       none of those, but seconds to a minute each on a loaded 2-core machine
# `make test-fast` runs the rest (`-m "not (browser or board or simulator or ssh or slow)"`);
# `make test` runs everything. A module may also set ``pytestmark`` itself.

TIERS = ("browser", "board", "simulator", "ssh", "slow")

# Helpers whose use, by a test, a fixture it uses or a module-level function either calls, marks it.
TIER_NAMES = {
    "browser": {"running_app", "start_app", "app_in_browser", "launch_chromium", "require_chromium", "sync_playwright"},
    "ssh": {"sshd", "ssh_device"},
}

# Whole modules, where every test (or nearly: see TIER_TESTS) starts the thing.
TIER_MODULES = {
    "board": {"test_board.py"},
    "browser": {"test_e2e_browser.py", "test_partition_e2e.py", "test_viewer_e2e.py", "test_lifecycle.py",
                "test_listening.py", "test_sweep_e2e.py",
                "test_profile_e2e.py", "test_pick_e2e.py", "test_link_e2e.py"},
    "ssh": {"test_devices_ssh.py"},
    "simulator": {"test_partition_analysis.py", "test_partition_worker.py", "test_partition_page.py",
                  "test_compare_page.py", "test_hot_session.py", "test_migration.py", "test_migration_timeline.py",
                  "test_viewer_page.py", "test_partition_cli.py", "test_cache_best_effort.py", "test_app_timeline.py",
                  "test_fusion_sweep.py", "test_aihub_truth.py",
                  "test_sweep_simulator.py", "test_profile_measure.py", "test_profile_cli.py", "test_sweep_devices.py",
                  "test_shape_presets.py"},
    "slow": set(),
}

# Single tests by node id without parameters (``module.py::name``: every parameter set). The slow ones
# were measured with ``pytest -v`` per test on this 2-core machine under load (seconds in comments,
# the slowest parameter set): above about 1.4 s each, or 5 s over all parameter sets.
TIER_TESTS: dict[str, set[str]] = {
    "browser": {
        "test_access.py::test_another_os_user_gets_no_page_and_runs_nothing",  # its own `streamlit run`
    },
    "simulator": {
        "test_device_cli.py::test_this_host_says_htp_simulator_through_the_cli",
        "test_root_causes.py::test_the_htp_names_nonzero_and_range_as_root_causes_on_the_simulator",
        "test_runtime.py::test_runtime_refusal_carries_its_own_message",
        "test_runtime.py::test_probe_success_means_qnn_claimed_nodes",
        "test_runtime.py::test_assignment_lists_each_subgraph",
        "test_worker.py::test_probe_tells_which_backends_initialize_here",  # 1.74 s
        "test_notebook.py::test_the_example_notebook_runs_end_to_end",  # 18.8 s
        "test_partition_startup.py::test_a_spare_worker_is_adopted_by_the_next_local_client",  # 3.5 s
        "test_partition_startup.py::test_partition_first_and_cached_runs_leave_no_worker_behind",  # 5.1 s
        "test_report.py::test_a_timeline_that_cannot_run_leaves_the_rest_of_the_report",  # 8.0 s
        "test_report.py::test_the_report_holds_every_section_and_escapes_model_text",  # 5.2 s
        "test_report.py::test_a_partition_section_is_titled_by_model_and_settings_not_by_dimension_expressions",
        "test_timeline_cli.py::test_json_has_the_documented_shape",  # 8.9 s
        "test_timeline_cli.py::test_readable_report",  # 4.4 s
        "test_knobs.py::test_a_timeline_takes_input_shapes_and_the_optimization_level",
        "test_snippet.py::test_the_snippet_creates_the_session_on_the_htp_simulator",
        "test_page_state.py::test_dimensions_applied_on_partitions_are_the_timelines_and_compares",  # analyses
        "test_page_state.py::test_the_node_picker_and_the_details_agree_before_and_after_a_new_analysis",  # analyses
        "test_profile_page.py::test_a_real_profile_on_the_htp_simulator_through_the_page",
        "test_profile_page.py::test_a_profile_keeps_running_while_the_user_is_on_another_page",
        "test_timeline_workload.py::test_the_simulator_default_workload_serves_after_the_swap",
        "test_timeline_workload.py::test_the_cached_strategy_measures_the_compiled_context",
        "test_timeline_snippet.py::test_the_script_migrates_on_the_htp_simulator",
        "test_sweep_ray.py::test_a_sweep_on_a_two_node_cluster_gets_the_cells_of_jobs_and_uses_both_nodes",  # + a Ray cluster
        "test_ray_auto.py::test_auto_finds_the_users_own_cluster_says_so_and_warns_once_when_its_session_folder_is_shared",
        "test_ray_auto.py::test_the_documented_safe_cluster_takes_the_sweep_with_its_token_and_refuses_it_without",
    },
    "slow": {
        "test_shape_hints.py::test_the_timeline_page_warns_of_a_degenerate_shape_before_the_run",  # an AppTest
        "test_timeline_workload.py::test_the_page_says_when_the_swap_came_after_the_last_request",  # an AppTest
        # A `python -m dashboard` child per parameter set: 1 to 10 s each under load.
        "test_cli_classify.py::test_bad_input_is_one_error_line_and_exit_2",
        "test_device_cli.py::test_bad_input_is_one_line_before_anything_runs",
        "test_timeline_cli.py::test_inputs_too_large_to_generate_are_refused_before_allocating",
        "test_report.py::test_report_command_bad_input_is_one_error_line",
        "test_report.py::test_a_report_made_where_streamlit_is_imported_draws_in_colour_with_room_for_its_labels",  # 2.6 s
        "test_worker.py::test_a_line_without_end_stops_the_worker_and_the_client_memory_stays_bounded",
        "test_worker.py::test_a_worker_group_stops_its_workers_and_the_waiting_call_says_why",
        "test_origin_settings.py::test_the_devices_page_adds_a_listed_interpreter_by_name",
        "test_origin_settings.py::test_the_cli_refuses_a_missing_library_in_one_line_before_starting_a_worker",
        "test_platform.py::test_the_worker_side_imports_only_the_runtime_requirements",  # 2.36 s
        "test_proto.py::test_the_message_classes_are_onnxs_when_the_reader_comes_first",  # 2.5 s
        "test_partition_imports.py::test_the_rewritten_copy_for_the_sessions_is_written_without_onnx",  # 1.4 s
        "test_partition_imports.py::test_classify_runs_with_onnx_refused",  # a `classify` child, 1-2 s
        "test_model_io.py::test_classify_cli_refuses_a_constant_reading_etc_passwd",  # 2.24 s
        "test_worker.py::test_a_worker_whose_client_goes_away_mid_request_exits_and_removes_its_scratch",  # 2.16 s
        "test_uploads.py::test_one_file_uploaded_under_two_names_is_stored_once",  # 2.15 s
        "test_intake_memory.py::test_the_child_passes_the_readers_own_line_on",  # 2.15 s
        "test_worker.py::test_worker_killed_from_outside_mid_call",  # 2.13 s
        "test_model_io.py::test_bodies_nested_beyond_protobufs_limit_are_one_error_line",  # 2.12 s
        "test_uploads.py::test_a_closed_session_removes_its_upload",  # 2.11 s
        "test_samples.py::test_generator_is_deterministic_across_processes",  # 2.05 s
        "test_ort_view.py::test_batchnorm_folding_changes_the_ep_verdict",  # 1.99 s
        "test_root_causes.py::test_the_page_names_the_root_causes_before_the_downstream_count",  # 2.14 s
        "test_viewer_graph.py::test_overlays_colour_classes_verdicts_and_plans",  # 1.96 s
        "test_worker.py::test_unknown_command_and_bad_requests_keep_the_worker_alive",  # 1.95 s
        "test_origin_settings.py::test_the_devices_page_refuses_a_raw_interpreter_path_and_an_unlisted_known_hosts",
        "test_worker.py::test_an_infinite_timeout_waits_without_bound_and_nonsense_is_refused",  # 1.83 s
        "test_worker.py::test_hello_reports_runtime_versions",  # 1.81 s
        "test_model_io.py::test_commands_show_hashing_progress_of_a_large_model_on_stderr",  # 1.76 s
        "test_packaging.py::test_bad_input_through_the_console_script_is_one_line",  # 1.72 s
        "test_cancel_start.py::test_cancel_ends_a_stopped_worker_while_a_model_chunk_is_being_written_to_it",  # 1.64 s
        "test_origin_settings.py::test_the_cli_notes_that_a_remote_device_s_paths_are_not_checked",  # 1.57 s
        "test_intake_memory.py::test_the_1gb_string_attribute_is_refused_in_one_line_before_it_is_copied",  # 1.53 s
        "test_intake_memory.py::test_the_cli_refuses_over_a_lowered_cap_with_exit_2",  # 1.48 s
        "test_cli_classify.py::test_table_names_both_verdicts_and_the_disagreement",  # 1.46 s
        "test_doctor.py::test_a_healthy_board_passes_every_check",  # 16.7 s
        "test_cli_classify.py::test_bench_rejects_nonsense_sizes",  # 14.5 s
        "test_worker.py::test_timeout_stops_a_hung_worker_and_states_the_timeout_that_was_set",  # 4.6 s
        "test_packaging.py::test_the_console_script_classifies_a_bundled_sample",  # 4.5 s
        "test_worker.py::test_native_crash_is_reported_with_its_signal_and_caller_survives",  # 3.6 s
        "test_packaging.py::test_the_installed_package_starts_its_runtime_worker",  # 3.1 s
        "test_worker.py::test_native_stdout_noise_never_corrupts_the_protocol",  # 2.8 s
        "test_packaging.py::test_the_notebook_layer_imports_neither_streamlit_nor_the_runtime",  # 2.6 s
        "test_origin_settings.py::test_known_hosts_from_a_page_is_a_file_the_operator_allows",  # 2.6 s
        "test_model_io.py::test_cli_warns_but_succeeds_on_unknown_domain_and_hostile_names",  # 2.6 s
        "test_worker.py::test_model_upload_in_chunks_is_verified_and_kept_by_digest",  # 2.6 s
        "test_viewer_servers.py::test_each_model_gets_its_own_server_and_the_oldest_is_stopped",  # 2.5 s
        "test_app_overview.py::test_every_zoo_model_renders_both_pages",  # over 120 s: the zoo on two pages
        "test_app_classifier_optimized.py::test_button_classifies_the_graph_onnx_runtime_hands_the_ep",  # 4.8 s
        "test_app_intake.py::test_a_model_over_the_readers_memory_limit_is_one_error_and_keeps_the_previous_model",
        "test_app_intake.py::test_an_upload_over_the_readers_memory_limit_is_one_error_by_its_name",  # 8.5 s
        "test_app_intake.py::test_bad_path_shows_one_error_and_keeps_the_previous_model",  # 3.9 s
        "test_app_intake.py::test_bad_upload_keeps_the_previous_model",  # 3.7 s
        "test_app_intake.py::test_hostile_upload_name_stays_inside_the_upload_folder",  # 5.5 s
        "test_app_intake.py::test_open_a_server_path",  # 2.9 s
        "test_app_intake.py::test_server_path_resolves_external_data_next_to_the_model",  # 3.6 s
        "test_app_intake.py::test_upload_is_stored_under_its_digest_and_shown_by_its_name",  # 4.3 s
        "test_app_scale.py::test_20k_node_model_renders_once_then_from_cache",  # 16.5 s
        "test_cancel_start.py::test_a_session_closed_while_its_worker_is_stopped_in_start_ends_it",  # 3.2 s
        "test_cancel_start.py::test_the_partitions_page_cancel_ends_a_worker_stopped_in_start",  # 5.5 s
        "test_classify_refined.py::test_20000_node_decoder_keeps_its_verdicts",  # 8.2 s
        "test_cli_classify.py::test_bench_prints_the_ratios_measured_in_the_same_run",  # 58.9 s
        "test_cli_classify.py::test_classify_never_imports_ui_or_runtime_packages",  # 2.5 s
        "test_cli_classify.py::test_directory_and_usage_errors_exit_2",  # 30.9 s
        "test_cli_classify.py::test_hostile_names_survive_as_json",  # 3.4 s
        "test_cli_classify.py::test_json_contract",  # 4.5 s
        "test_cli_classify.py::test_table_prints_hostile_names_as_escapes",  # 3.2 s
        "test_cli_classify.py::test_table_says_when_both_agree",  # 2.8 s
        "test_device_cli.py::test_an_unreachable_device_is_one_line",  # 31.8 s
        "test_device_cli.py::test_the_wheel_holds_the_worker",  # 11.2 s
        "test_doctor.py::test_devices_page_shows_the_doctor_next_to_the_probe",  # 6.7 s
        "test_intake_fuzz.py::test_byte_mutations_end_in_a_result_or_one_error_line",  # 6.9 s
        "test_intake_fuzz.py::test_invalid_utf8_in_every_string_is_one_error_line",  # 13.1 s
        "test_intake_fuzz.py::test_mutants_through_the_cli_exit_0_or_2_with_one_error_line",  # 13.0 s
        "test_intake_memory.py::test_a_chain_under_the_cap_classifies_in_about_a_kilobyte_a_node",  # 4.9 s
        "test_intake_memory.py::test_the_2m_node_chain_is_refused_by_the_node_cap_in_one_line_within_the_bound",
        "test_intake_memory.py::test_the_child_refuses_a_model_over_its_memory_limit_naming_it",  # 4.4 s
        "test_model_io.py::test_cli_bad_input_one_error_line_exit_2",  # 37.5 s
        "test_model_io.py::test_cli_main_installs_the_progress_reporter",  # 3.1 s
        "test_model_io.py::test_cli_special_paths_are_one_printable_error_line",  # 13.7 s
        "test_model_io.py::test_embedded_weights_are_not_read_into_memory",  # 3.9 s
        "test_model_io.py::test_large_tensors_in_attributes_and_bodies_are_not_materialized",  # 3.7 s
        "test_origin_settings.py::test_a_page_names_a_listed_interpreter_and_the_terminal_takes_a_path_or_a_name",
        "test_origin_settings.py::test_the_cli_keeps_a_dump_folder_and_the_runtime_writes_there",  # 2.9 s
        "test_origin_settings.py::test_the_switches_marked_as_writing_are_exactly_those_that_write_into_the_working_directory",
        "test_ort_view.py::test_cli_reports_the_optimized_view_only_when_asked",  # 4.3 s
        "test_packaging.py::test_the_installed_package_finds_its_samples_and_not_the_checkout",  # 5.3 s
        "test_provider_options.py::test_the_cli_refuses_a_bad_option_in_one_line_before_starting_a_worker",  # 2.6 s
        "test_report.py::test_every_page_offers_the_report_and_the_classifier_its_json",  # 15.2 s
        "test_timeline_cli.py::test_bad_input_is_one_error_line",  # 11.8 s
        "test_timeline_cli.py::test_cli_process_never_loads_streamlit_or_the_runtime",  # 6.5 s
        "test_uploads.py::test_a_failed_upload_keeps_the_previous_upload_and_leaves_nothing",  # 3.6 s
        "test_uploads.py::test_folder_is_created_private",  # 7.7 s
        "test_uploads.py::test_moving_on_from_an_upload_removes_its_file",  # 3.2 s
        "test_jobs.py::test_ctrl_c_on_the_timeline_command_stops_its_worker_before_it_exits",  # 7.9 s
        "test_jobs.py::test_a_timeline_cancelled_mid_run_stops_its_worker",  # 2.8 s
        "test_profile_page.py::test_a_running_profile_shows_its_step_and_cancel_stops_it_keeping_the_earlier_profiles",
        "test_profile_page.py::test_the_sidebars_html_report_holds_the_sessions_profiles",  # 2.5 s
        "test_profile_page.py::test_the_time_left_follows_the_pace_of_the_runs",  # 6 s: two paced runs
        "test_sweep.py::test_the_command_exits_2_with_one_line_and_no_traceback",  # a `python -m dashboard` child
        "test_sweep.py::test_memory_stays_flat_over_100_models_by_4_socs",  # 2.1 s: 400 cells under tracemalloc
        "test_sweep_ray.py::test_an_unreachable_cluster_is_one_error_line_before_anything_is_written",  # a CLI child
        "test_sweep_ray.py::test_a_sweep_without_ray_never_loads_it",  # a CLI child, 2-3 s
        "test_ray_auto.py::test_an_address_file_another_user_wrote_is_refused_and_never_connected_to",  # a CLI child
        "test_ray_auto.py::test_a_stale_address_is_one_error_line_not_a_hang",  # a CLI child per parameter set
        "test_ray_auto.py::test_the_address_file_is_the_one_ray_itself_reads",  # imports Ray
    },
}


def _code_names(function) -> set[str]:
    """The global and attribute names a function's code uses, nested functions included."""
    names: set[str] = set()
    stack = [function.__code__] if hasattr(function, "__code__") else []
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        names.update(code.co_freevars)
        stack.extend(c for c in code.co_consts if isinstance(c, type(code)))
    return names


def _names_used(item) -> set[str]:
    """Names the test uses, through its fixtures and the module-level functions of its module."""
    module = getattr(item, "module", None)
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        functions.extend(d.func for d in defs)
    names: set[str] = set(getattr(item, "fixturenames", ()))
    seen: set[int] = set()
    while functions:
        function = functions.pop()
        if function is None:
            continue
        function = inspect.unwrap(function)  # a @contextmanager helper: the generator's own code
        if id(function) in seen:
            continue
        seen.add(id(function))
        used = _code_names(function)
        names |= used
        for name in used:
            value = vars(module).get(name) if module is not None else None
            if callable(value) and getattr(value, "__module__", None) == module.__name__:
                functions.append(value)
    return names


def pytest_collection_modifyitems(config, items):
    modules = {item.path.name: item.module for item in items if getattr(item, "module", None) is not None}
    stale = sorted(t for tests in TIER_TESTS.values() for t in tests
                   if t.split("::")[0] in modules and not hasattr(modules[t.split("::")[0]], t.split("::")[1]))
    if stale:  # a renamed test would silently change tiers
        raise pytest.UsageError(f"tests/conftest.py TIER_TESTS names tests that do not exist: {stale}")
    for item in items:
        file = item.path.name
        test_id = f"{file}::{getattr(item, 'originalname', item.name)}"
        names = _names_used(item)
        for tier in TIERS:
            if (file in TIER_MODULES.get(tier, ()) or test_id in TIER_TESTS.get(tier, ())
                    or names & TIER_NAMES.get(tier, set())):
                item.add_marker(tier)
