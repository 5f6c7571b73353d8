"""How a session is built, as data: ``SessionConfig`` and the QNN provider options it implies.

Kept apart from ``runtime.qnn`` (which imports onnxruntime) so the dashboard, the CLI and the
worker protocol can build, validate and send a configuration without loading the runtime; only
the worker turns it into a session.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from dashboard.errors import UserError
from dashboard.intake.shapes import check_dims
from dashboard.runtime import qnn_options
from dashboard.runtime.socs import resolve_soc
from dashboard.serde import Record

BACKENDS = ("htp", "gpu", "cpu")  # "cpu" = ONNX Runtime's own CPU EP, not a QNN backend
OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")


@dataclass
class SessionConfig(Record):
    """Everything that decides how a session is built. JSON-serialisable (it crosses the worker
    protocol and keys the result cache)."""

    backend: str = "htp"
    dims: dict[str, int] = field(default_factory=dict)
    fp16: bool = False
    soc: str | None = None
    provider_options: dict[str, str] = field(default_factory=dict)
    session_config: dict[str, str] = field(default_factory=dict)
    optimization_level: str = "all"
    intra_op_threads: int = 0

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UserError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.optimization_level not in OPTIMIZATION_LEVELS:
            raise UserError(f"unknown optimization level {self.optimization_level!r}; "
                            f"one of {', '.join(OPTIMIZATION_LEVELS)}")
        check_dims(self.dims)
        qnn_options.check(self.provider_options)

    def replace(self, **changes) -> "SessionConfig":
        """A copy with ``changes`` (validated like any construction)."""
        return dataclasses.replace(self, **changes)

    def qnn_options(self) -> dict[str, str]:
        """Provider options for the QNN EP (fp16 needs a soc_model, so the SoC is resolved here). A
        ``backend_path`` given as an option replaces ``backend_type`` (the EP takes only one)."""
        options: dict[str, str] = {} if "backend_path" in self.provider_options else {"backend_type": self.backend}
        soc = resolve_soc(self.soc) if self.soc else None
        if soc is not None:
            if soc.soc_model is not None:
                options["soc_model"] = str(soc.soc_model)
            options["htp_arch"] = str(soc.htp_arch)
        if self.fp16:
            if "soc_model" not in options and "soc_model" not in self.provider_options:
                if soc is not None:
                    raise UserError(f"HTP fp16 precision needs a soc_model and none is published for {soc.name}: "
                                    "pass the one your QNN SDK documents with --option soc_model=N")
                raise UserError("HTP fp16 precision needs a SoC (the runtime refuses "
                                "enable_htp_fp16_precision without soc_model): pick one with --soc")
            options["enable_htp_fp16_precision"] = "1"
        options.update({k: str(v) for k, v in self.provider_options.items()})
        return options
