"""Lazy package exports: a subpackage names its public API in its ``__init__`` without importing it.

Why: ``python -m dashboard classify`` must cost little more than reading the model, and the
dashboard process must never import onnxruntime. A package ``__init__`` that imported its modules
eagerly would pull pandas, plotly or onnxruntime into every command that touches the package.
``exports`` gives the package a module ``__getattr__`` (PEP 562) that imports a name's module on
first access instead.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable


def exports(package: str, names: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``names`` maps each public name to the
    submodule (relative to ``package``) that defines it."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
