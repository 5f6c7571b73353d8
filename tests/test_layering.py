"""The package layout's rules, checked on the source (every import statement, including the ones
inside functions): capabilities depend downwards only, Streamlit stays in the views and the QNN
runtime stays behind one module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dashboard"
CAPABILITIES = ("intake", "classify", "runtime", "partition", "timeline", "profile", "render", "sweep", "cli",
                "views")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, package: str) -> set[str]:
    """Every module ``source`` (a module of ``package``) imports, absolute (relative imports
    resolved), wherever the import statement stands."""
    tree = ast.parse(source)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def package_of(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


SOURCES = {module_name(p): imports(p.read_text(encoding="utf-8"), package_of(p)) for p in PACKAGE.rglob("*.py")}
TOP_LEVEL = {"__init__.py", "__main__.py", "errors.py", "lazy.py", "serde.py", "platform.py",
             "printable.py", "access.py"}


def importers_of(prefix: str) -> set[str]:
    return {m for m, names in SOURCES.items() if any(n == prefix or n.startswith(prefix + ".") for n in names)}


def test_every_capability_is_a_package_that_states_its_api():
    for name in CAPABILITIES:
        init = PACKAGE / name / "__init__.py"
        assert init.is_file(), f"dashboard/{name}/ is not a package"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"dashboard/{name}/__init__.py has no docstring"
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose <= TOP_LEVEL, f"modules outside a capability package: {sorted(loose - TOP_LEVEL)}"


@pytest.mark.parametrize("lower", ["dashboard.intake", "dashboard.classify"])
def test_intake_and_classify_never_import_the_runtime_or_anything_above(lower):
    above = ("dashboard.runtime", "dashboard.partition", "dashboard.timeline", "dashboard.profile",
             "dashboard.render", "dashboard.sweep", "dashboard.cli", "dashboard.views")
    offenders = {m: sorted(n for n in SOURCES[m] if n.startswith(above))
                 for m in SOURCES if m.startswith(lower)}
    assert not {m: n for m, n in offenders.items() if n}


def within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_top_level_modules_import_only_top_level_modules():
    """``dashboard/*.py`` sit below every capability (errors, serde, platform, ...): one of them
    importing a capability package makes that package's imports everyone's, and closes cycles.
    The exception is ``__main__`` (``python -m dashboard``), the entry point: it runs the CLI, so it
    stands above everything, which holds only while no module imports it."""
    capabilities = tuple(f"dashboard.{name}" for name in CAPABILITIES)
    top = {module_name(PACKAGE / name) for name in TOP_LEVEL} - {"dashboard.__main__"}
    offenders = {m: sorted(n for n in SOURCES[m] if within(n, capabilities)) for m in top if m in SOURCES}
    assert not {m: n for m, n in offenders.items() if n}
    assert not importers_of("dashboard.__main__")


def test_the_runtime_never_imports_partition_or_timeline():
    """Partition and timeline are built on the runtime; their protocol records register themselves
    with ``dashboard.runtime.protocol`` instead of being imported by it."""
    offenders = {m: sorted(n for n in SOURCES[m] if within(n, ("dashboard.partition", "dashboard.timeline",
                                                                "dashboard.profile")))
                 for m in SOURCES if within(m, ("dashboard.runtime",))}
    assert not {m: n for m, n in offenders.items() if n}


def test_the_page_job_runner_serves_every_kind_of_run():
    """``views/jobs.py`` shows any long run (``runtime.jobs``): it imports no capability's types,
    so a partition, a timeline and the next kind of run all go through it unchanged."""
    capabilities = ("dashboard.partition", "dashboard.timeline", "dashboard.classify", "dashboard.render")
    assert not sorted(n for n in SOURCES["dashboard.views.jobs"] if within(n, capabilities))


def test_the_capabilities_a_sweep_runs_never_import_it():
    """A sweep runs partition and classify cells; they, the runtime and the renderers stay below it
    (only the command line and the pages import ``dashboard.sweep``)."""
    below = ("dashboard.intake", "dashboard.classify", "dashboard.runtime", "dashboard.partition",
             "dashboard.timeline", "dashboard.render")
    offenders = {m: sorted(n for n in SOURCES[m] if within(n, ("dashboard.sweep",)))
                 for m in SOURCES if within(m, below)}
    assert not {m: n for m, n in offenders.items() if n}


def test_only_views_import_streamlit():
    offenders = sorted(m for m in importers_of("streamlit") if not m.startswith("dashboard.views"))
    assert not offenders


def test_only_the_runtime_module_imports_onnxruntime_qnn():
    assert importers_of("onnxruntime_qnn") == {"dashboard.runtime.qnn"}


def test_the_checks_see_every_kind_of_import():
    source = ("import streamlit as st\n"
              "def f():\n    from onnxruntime_qnn import get_library_path\n"
              "class C:\n    def g(self):\n        from ..runtime import qnn\n")
    found = imports(source, "dashboard.classify")
    assert {"streamlit", "onnxruntime_qnn", "dashboard.runtime", "dashboard.runtime.qnn"} <= found
