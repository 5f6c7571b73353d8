"""How a session is built, as data: ``SessionConfig`` and the QNN provider options it implies.

Kept apart from ``runtime.qnn`` (which imports onnxruntime) so the dashboard, the CLI and the
worker protocol can build, validate and send a configuration without loading the runtime; only
the worker turns it into a session. An analysis builds one per backend from the user's
``knobs.Settings`` (``SessionConfig.of``); the checks and constants are the settings' own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from dashboard.errors import UserError
from dashboard.runtime import knobs, qnn_options
from dashboard.runtime.socs import resolve_soc
from dashboard.serde import Record


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
        from dashboard.intake.shapes import check_dims

        knobs.check_session_backend(self.backend)
        knobs.check_optimization_level(self.optimization_level)
        check_dims(self.dims)
        qnn_options.check(self.provider_options)

    @classmethod
    def of(cls, settings: knobs.Settings, backend: str, *, dims: dict[str, int] | None = None,
           qnn: bool = True) -> "SessionConfig":
        """The session ``settings`` ask for on ``backend``. ``dims``: the resolved dimensions
        (every symbolic one fixed) instead of the user's overrides; ``qnn=False`` leaves out fp16,
        the SoC and the provider options (a timeline's fast backend: they are for the HTP)."""
        return cls(backend=backend, dims=dict(settings.dims if dims is None else dims),
                   optimization_level=settings.optimization_level,
                   **(dict(fp16=settings.fp16, soc=settings.soc, provider_options=dict(settings.provider_options))
                      if qnn else {}))

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
                                    "set the one your QNN SDK documents as provider option soc_model=N "
                                    f"({knobs.ref('provider_options')})")
                raise UserError("HTP fp16 precision needs a SoC (the runtime refuses "
                                f"enable_htp_fp16_precision without soc_model): pick one ({knobs.ref('soc')})")
            options["enable_htp_fp16_precision"] = "1"
        options.update({k: str(v) for k, v in self.provider_options.items()})
        return options
