"""Shared test fixtures: the dashboard under ``streamlit.testing.v1.AppTest`` and models to feed it.

``app(*script_args)`` builds an AppTest of ``app.py`` as ``streamlit run app.py -- *script_args``
would start it (the script reads ``sys.argv``, which AppTest shares with the test process).
Streamlit's resource caches are process-wide, so each test using ``app`` starts with them cleared.
"""

from __future__ import annotations

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
                "test_listening.py"},
    "ssh": {"test_devices_ssh.py"},
    "simulator": {"test_partition_analysis.py", "test_partition_worker.py", "test_partition_page.py",
                  "test_compare_page.py", "test_hot_session.py", "test_migration.py", "test_migration_timeline.py",
                  "test_viewer_page.py", "test_partition_cli.py", "test_cache_best_effort.py", "test_app_timeline.py"},
    "slow": set(),
}

# Single tests by node id without parameters (``module.py::name``).
TIER_TESTS: dict[str, set[str]] = {
    "simulator": set(),
    "slow": set(),
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
        if function is None or id(function) in seen:
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
    for item in items:
        file = item.path.name
        test_id = f"{file}::{getattr(item, 'originalname', item.name)}"
        names = _names_used(item)
        for tier in TIERS:
            if (file in TIER_MODULES.get(tier, ()) or test_id in TIER_TESTS.get(tier, ())
                    or names & TIER_NAMES.get(tier, set())):
                item.add_marker(tier)
