"""Timeline data model and metrics: what a hot-migration run (or any serving strategy) did, when.

A strategy's run is two lists recorded by the runner in the worker (``dashboard.timeline.runner``):

- events ``{t, kind, backend, detail}``: session creation, QNN finalize, warm-up, serve, swap,
  drain, release, failures. ``t`` is seconds from the strategy's start (when the application
  would have started loading the model).
- requests ``{id, arrival, start, end, backend, ok}``: ``arrival`` is the open-loop schedule time,
  ``start`` when a session began serving it, ``end`` when its answer was ready.

Everything else (metrics, Gantt phases, CSV) is derived here from those two lists, by the same
functions for the worker's final result, the live chart and the CLI, so the numbers a user sees
on the page and in ``--json`` cannot disagree. Plain dataclasses, no Streamlit, no runtime.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import ClassVar, Iterable

from dashboard.errors import UserError
from dashboard.runtime.knobs import SESSION_BACKENDS, TIMEOUTS, Settings
from dashboard.serde import Record

STRATEGIES = ("fast", "target", "cached", "migrate", "auto")
STRATEGY_TITLES = {
    "fast": "fast only",
    "target": "target only (cold compile)",
    "cached": "target from cached EPContext",
    "migrate": "hot migration",
    "auto": "auto (classifier's backend)",
}
# Every event kind the runner emits (the JSON contract; the issue names the first seven).
EVENT_KINDS = (
    "session_create_start", "session_create_end", "warmup_start", "warmup_end", "swap", "drain_end",
    "migration_failed",
    "finalize_start", "serve_start", "session_released", "session_failed", "migration_skipped",
    "context_build", "context_loaded", "auto_choice", "shared_memory", "workload_end",
)
# Requests started right after a swap whose latency is checked against the new backend's steady
# state: a swap that stalls shows up in these first few.
POST_SWAP_WINDOW = 3


POLICIES = ("always", "if_faster")
FAST_BACKENDS = tuple(b for b in SESSION_BACKENDS if b != "htp")  # what serves while the HTP compiles
TARGET_BACKENDS = ("htp",)
# Output agreement between backends: |a - b| <= atol + rtol * |b| (HTP computes in reduced
# precision even without fp16; on the bundled samples the worst case measured was 0.023 on
# values near 5, i.e. 0.5 %).
DEFAULT_ATOL = 1e-2
DEFAULT_RTOL = 1e-2
# A run's worker is stopped after this long unless told otherwise (``TimelineOptions.timeout``).
DEFAULT_TIMEOUT = TIMEOUTS["timeline"]
# Output agreement per output (``timeline.runner.output_agreement``): the page, the CLI and the
# runner read these, so what the page says the rule is cannot drift from the rule applied.
COSINE_AGREE = 0.999  # a float output whose direction is this close agrees even where some elements drift
TOP_K = 5
CLASS_AXIS = 10  # a last axis at least this long is read as class scores (logits): top-1 and top-k shown

# The workload a run starts with, by the hardware the target is measured on. Why two: on a device
# the HTP compiles in seconds and serves in milliseconds, so 40 requests at 20/s of every strategy
# take a minute; on the x86_64 HTP simulator one request of a real model takes 10 to 50 s, so the
# same workload takes half an hour and still ends before the swap (a compile of tens of seconds
# against a 2 s workload): nothing is served after it. There the default is the two strategies
# migration is about, paced at a low rate until a few requests have been served after the swap
# (``after_swap``), the other strategies serving the same number of requests.
WORKLOADS = {
    "simulator": {"strategies": ["fast", "migrate"], "requests": 2000, "rate": 5.0, "after_swap": 5},
    "device": {"strategies": list(STRATEGIES), "requests": 40, "rate": 20.0, "after_swap": 0},
}


def default_workload(hardware: str | None) -> dict:
    """The defaults for a target measured on ``hardware`` (``"simulator"``, else a device's)."""
    chosen = WORKLOADS["simulator" if hardware == "simulator" else "device"]
    return {k: list(v) if isinstance(v, list) else v for k, v in chosen.items()}


@dataclass
class TimelineOptions(Settings):
    """What a timeline run needs besides the model: the settings (``runtime.knobs.Settings``, as on
    the partitions page; ``backends`` is the partition's: a timeline's backends are its fast and
    target roles), the strategies to compare and the workload. JSON crosses the worker protocol;
    the same validation runs on both sides, so bad input fails before any process starts. Built
    from settings with ``TimelineOptions.from_settings(settings, requests=..., ...)``."""

    fast: str | None = None  # None: the device's QNN GPU where it initializes, else the CPU EP
    target: str = "htp"
    strategies: list[str] = field(default_factory=lambda: list(STRATEGIES))
    requests: int = 40  # with ``after_swap``: the most a run may serve per strategy
    rate: float = 20.0  # requests per second, open loop: arrivals do not wait for answers
    # > 0: the workload is paced at ``rate`` until this many requests arrived after the migration's
    # swap (or its failure), at most ``requests``; every other strategy then serves that many.
    after_swap: int = 0
    concurrency: int = 2  # requests served at once (so a swap has in-flight requests to drain)
    policy: str = "always"  # "if_faster": see dashboard.timeline.migration (one meaning for the API and the runner)
    warmup_runs: int = 3
    shared_memory: bool = False
    inputs: str | None = None  # .npz with one array per model input, or a saved data set (--data), on the worker's host
    inputs_label: str | None = None  # what ``inputs`` holds, in the record's words ("8 sample(s) of images/")
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    qnn_profiling: bool = True  # QNN basic profiling gives the finalize phase of the Gantt

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = [s for s in self.strategies if s not in STRATEGIES]
        if unknown or not self.strategies:
            raise UserError(f"unknown strategy {', '.join(unknown) or '(none given)'}; "
                            f"choose from {','.join(STRATEGIES)}")
        self.strategies = list(dict.fromkeys(self.strategies))
        if self.fast is not None and self.fast not in FAST_BACKENDS:
            raise UserError(f"fast backend must be one of {', '.join(FAST_BACKENDS)}, got {self.fast!r}")
        if self.target not in TARGET_BACKENDS:
            raise UserError(f"target backend must be one of {', '.join(TARGET_BACKENDS)}, got {self.target!r}")
        if self.policy not in POLICIES:
            raise UserError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if not isinstance(self.requests, int) or not 1 <= self.requests <= 100_000:
            raise UserError(f"requests per strategy must be between 1 and 100000, got {self.requests!r}")
        if not isinstance(self.after_swap, int) or not 0 <= self.after_swap <= 10_000:
            raise UserError(f"requests after the swap must be between 0 and 10000, got {self.after_swap!r}")
        if not (isinstance(self.rate, (int, float)) and 0 < self.rate <= 10_000):
            raise UserError(f"the rate must be a positive number of requests per second (at most 10000), "
                            f"got {self.rate!r}")
        if not isinstance(self.concurrency, int) or not 1 <= self.concurrency <= 64:
            raise UserError(f"concurrency must be between 1 and 64, got {self.concurrency!r}")
        if not isinstance(self.warmup_runs, int) or not 1 <= self.warmup_runs <= 100:
            raise UserError(f"warm-up runs must be between 1 and 100, got {self.warmup_runs!r}")
        if self.atol < 0 or self.rtol < 0:
            raise UserError("output tolerances must not be negative")


@dataclass
class Event(Record):
    t: float
    kind: str
    backend: str
    detail: str | None = None


@dataclass
class Request(Record):
    id: int
    arrival: float
    start: float | None
    end: float | None
    backend: str | None
    ok: bool
    error: str | None = None

    @property
    def latency(self) -> float | None:
        """Service time on the session (what the backend costs)."""
        if self.start is None or self.end is None:
            return None
        return self.end - self.start

    @property
    def response(self) -> float | None:
        """Arrival to answer (what the caller waits, queueing included)."""
        return None if self.end is None else self.end - self.arrival


@dataclass
class Phase:
    """A bar of the Gantt chart: one backend's session in one phase."""

    backend: str
    phase: str  # create, finalize, warm-up, serve, drain
    start: float
    end: float


@dataclass
class StrategyRun(Record):
    """One strategy on the workload: its timeline, metrics and output agreement."""

    JSON_EXTRAS: ClassVar[tuple[str, ...]] = ("metrics",)

    name: str
    backends: dict[str, str]  # role -> backend, e.g. {"fast": "cpu", "target": "htp"}
    events: list[Event] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    expected_requests: int = 0
    outputs: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def metrics(self) -> dict:
        return compute_metrics(self.events, self.requests, self.expected_requests)

    @property
    def swapped_after_last(self) -> bool:
        """The migration swapped only after every request had started: nothing served after it."""
        m = self.metrics
        return m["swap_at_s"] is not None and m["p50_after_s"] is None


@dataclass
class TimelineRun(Record):
    """A whole comparison: device, model, options, workload and every strategy's run."""

    device: dict
    model: str
    options: dict
    workload: dict
    strategies: dict[str, StrategyRun]
    fast: dict = field(default_factory=dict)  # backend, label, why it was chosen
    target: dict = field(default_factory=dict)
    shared_memory: dict = field(default_factory=dict)
    prime: dict = field(default_factory=dict)
    runtime: dict = field(default_factory=dict)
    label: str = ""


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100): always a latency that was really observed."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _first(events: list[Event], kind: str, backend: str | None = None) -> Event | None:
    for event in sorted(events, key=lambda e: e.t):
        if event.kind == kind and (backend is None or event.backend == backend):
            return event
    return None


def _durations(events: list[Event], start_kind: str, end_kind: str) -> dict[str, float]:
    """Per backend: time from its first ``start_kind`` event to the next ``end_kind`` event."""
    out: dict[str, float] = {}
    for start in sorted(events, key=lambda e: e.t):
        if start.kind != start_kind or start.backend in out:
            continue
        end = next((e for e in sorted(events, key=lambda e: e.t)
                    if e.kind == end_kind and e.backend == start.backend and e.t >= start.t), None)
        if end is not None:
            out[start.backend] = round(end.t - start.t, 6)
    return out


def compute_metrics(events: list[Event], requests: list[Request], expected: int = 0) -> dict:
    """The comparison figures of one strategy.

    Latency percentiles are service times (``end - start``) so that a backend's cost is not
    confused with queueing; ``response_*`` include the wait since arrival. Requests started
    before the swap count as *before*, the rest as *after* (the swap is atomic at dispatch).
    ``lost``/``duplicated`` check that every scheduled request was answered exactly once.
    """
    ok = [r for r in requests if r.ok and r.latency is not None]
    swap = _first(events, "swap")
    swap_at = swap.t if swap else None
    before = [r for r in ok if swap_at is None or r.start < swap_at]
    after = [r for r in ok if swap_at is not None and r.start >= swap_at]
    ids = [r.id for r in requests]
    first_end = min((r.end for r in ok), default=None)
    span_start = min((r.arrival for r in requests), default=0.0)
    last_end = max((r.end for r in ok), default=None)
    throughput = None
    if ok and last_end is not None and last_end > span_start:
        throughput = len(ok) / (last_end - span_start)
    served: dict[str, int] = {}
    for r in ok:
        served[r.backend] = served.get(r.backend, 0) + 1

    in_flight = [r for r in ok if swap_at is not None and r.start < swap_at < r.end]
    first_after = sorted(after, key=lambda r: r.start)[:POST_SWAP_WINDOW]
    steady_before = [r.latency for r in before if swap_at is None or r.end <= swap_at]
    steady_after = [r.latency for r in sorted(after, key=lambda r: r.start)[POST_SWAP_WINDOW:]]
    drain_end = next((e for e in sorted(events, key=lambda e: e.t) if e.kind == "drain_end"
                      and swap is not None and e.t >= swap.t), None)
    return {
        "first_response_s": _round(first_end),
        "swap_at_s": _round(swap_at),
        "p50_before_s": _round(percentile((r.latency for r in before), 50)),
        "p50_after_s": _round(percentile((r.latency for r in after), 50)),
        "p95_s": _round(percentile((r.latency for r in ok), 95)),
        "p99_s": _round(percentile((r.latency for r in ok), 99)),
        "p99_before_s": _round(percentile(steady_before, 99)),
        "p99_after_s": _round(percentile(steady_after, 99)),
        "response_p50_s": _round(percentile((r.response for r in ok), 50)),
        "response_p99_s": _round(percentile((r.response for r in ok), 99)),
        "throughput_rps": _round(throughput, 3),
        "failed": sum(1 for r in requests if not r.ok),
        "served": served,
        "expected": expected or len(requests),
        "lost": max((expected or len(requests)) - len(set(ids)), 0),
        "duplicated": len(ids) - len(set(ids)),
        "session_create_s": _durations(events, "session_create_start", "session_create_end"),
        "finalize_s": _durations(events, "finalize_start", "session_create_end"),
        "warmup_s": _durations(events, "warmup_start", "warmup_end"),
        "swap_drain_s": _round(drain_end.t - swap.t) if drain_end else None,
        "swap_in_flight": len(in_flight),
        "swap_in_flight_max_s": _round(max((r.latency for r in in_flight), default=None)),
        "post_swap_first_max_s": _round(max((r.latency for r in first_after), default=None)),
    }


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


_OPEN = {"session_create_start": "create", "finalize_start": "finalize", "warmup_start": "warm-up",
         "serve_start": "serve", "swap": "drain"}
_CLOSES = {
    "create": ("finalize_start", "session_create_end", "session_failed"),
    "finalize": ("session_create_end", "session_failed"),
    "warm-up": ("warmup_end", "migration_failed", "session_failed"),
    "serve": ("session_released",),  # and the swap, for the session it replaces
    "drain": ("drain_end", "session_released"),
}


def phases(events: list[Event], end_of_run: float | None = None) -> list[Phase]:
    """Gantt bars per backend from the event stream.

    A ``swap`` opens the *drain* of the session that served before it (the backend that is not
    the swap's target); every other opening event belongs to its own backend. A phase still open
    at the end (a live run) is drawn up to ``end_of_run``.
    """
    ordered = sorted(events, key=lambda e: e.t)
    open_: dict[tuple[str, str], float] = {}
    out: list[Phase] = []
    serving: str | None = None
    for event in ordered:
        backend = event.backend
        if event.kind == "swap":
            old = serving if serving and serving != backend else None
            if old is not None:
                _close(open_, out, old, "serve", event.t)
                open_[(old, "drain")] = event.t
            serving = backend
            open_[(backend, "serve")] = event.t
            continue
        for phase, closers in _CLOSES.items():
            if event.kind in closers and (backend, phase) in open_:
                _close(open_, out, backend, phase, event.t)
        phase = _OPEN.get(event.kind)
        if phase is not None:
            open_[(backend, phase)] = event.t
            if phase == "serve":
                serving = backend
    if end_of_run is not None:
        for (backend, phase), start in list(open_.items()):
            out.append(Phase(backend, phase, start, max(end_of_run, start)))
    return sorted(out, key=lambda p: (p.start, p.backend))


def _close(open_: dict, out: list[Phase], backend: str, phase: str, t: float) -> None:
    start = open_.pop((backend, phase), None)
    if start is not None:
        out.append(Phase(backend, phase, start, t))


def strategy_table(run: TimelineRun) -> list[dict]:
    """One row per strategy: the comparison table of the page and the metrics CSV."""
    rows = []
    for name, strategy in run.strategies.items():
        m = strategy.metrics
        roles = [strategy.backends[k] for k in ("fast", "target") if strategy.backends.get(k)]
        rows.append({
            "strategy": name,
            "title": STRATEGY_TITLES.get(name, name),
            "backends": " → ".join(roles) or ", ".join(strategy.backends.values()),
            "first_response_s": m["first_response_s"],
            "swap_at_s": m["swap_at_s"],
            "p50_before_s": m["p50_before_s"],
            "p50_after_s": m["p50_after_s"],
            "p95_s": m["p95_s"],
            "p99_s": m["p99_s"],
            "response_p99_s": m["response_p99_s"],
            "throughput_rps": m["throughput_rps"],
            "failed": m["failed"],
            "create_s": sum(m["session_create_s"].values()) if m["session_create_s"] else None,
            "warmup_s": sum(m["warmup_s"].values()) if m["warmup_s"] else None,
        })
    return rows


def cached_vs_cold(run: TimelineRun) -> str | None:
    """Where the time of a cached EPContext start goes, next to a cold compile, in one sentence:
    what the context saved (session creation: context load against compile) and what it cannot
    save (the warm-up runs, and the model's own run time before the first answer). None unless
    both strategies ran and served.

    Why it is needed: on a small graph the compile is a fraction of a second, so "cached" answers
    first barely sooner than "target only" (measured on the CNN sample: 760 ms against 748 ms),
    which reads like a broken cache. The figures say why."""
    cold, cached = run.strategies.get("target"), run.strategies.get("cached")
    if cold is None or cached is None:
        return None
    a, b = cold.metrics, cached.metrics
    if a["first_response_s"] is None or b["first_response_s"] is None:
        return None
    compile_s, load_s = sum(a["session_create_s"].values()), sum(b["session_create_s"].values())
    warm_s = sum(b["warmup_s"].values())
    gain = a["first_response_s"] - b["first_response_s"]
    rest = b["first_response_s"] - load_s - warm_s
    saved = compile_s - load_s
    saving = f"saved {_seconds(saved)}" if saved >= 0 else f"{_seconds(-saved)} longer than the compile"
    return (f"The EPContext model loaded in {_seconds(load_s)} against a {_seconds(compile_s)} compile "
            f"({saving}); the first answer still waited for the warm-up, "
            f"{_seconds(warm_s)}, and {_seconds(max(rest, 0.0))} of queueing and the first run, which a "
            f"context cannot remove, so it came {_seconds(abs(gain))} {'sooner' if gain >= 0 else 'later'} "
            "than after a cold compile. The saving grows with the graph: a large model compiles for "
            "seconds to minutes, its context loads in a fraction of that.")


def _seconds(value: float) -> str:
    """A duration in words; callers pass magnitudes and say the direction themselves ("later")."""
    return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"


def requests_csv(run: TimelineRun) -> str:
    """Every request of every strategy, one row each (latency = service time)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["strategy", "id", "arrival_s", "start_s", "end_s", "latency_s", "response_s",
                     "backend", "ok", "error"])
    for name, strategy in run.strategies.items():
        for r in sorted(strategy.requests, key=lambda r: r.id):
            writer.writerow([name, r.id, r.arrival, r.start, r.end, _round(r.latency), _round(r.response),
                             r.backend, r.ok, r.error or ""])
    return out.getvalue()


def metrics_csv(run: TimelineRun) -> str:
    """The strategy comparison table as CSV."""
    rows = strategy_table(run)
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()


def events_csv(run: TimelineRun) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["strategy", "t_s", "kind", "backend", "detail"])
    for name, strategy in run.strategies.items():
        for e in sorted(strategy.events, key=lambda e: e.t):
            writer.writerow([name, e.t, e.kind, e.backend, e.detail or ""])
    return out.getvalue()


def output_text(row: dict) -> str:
    """One output's agreement, as the CLI and the page say it (``timeline.runner.output_agreement``)."""
    parts = ["agrees" if row.get("agree") else "DIFFERS"]
    if row.get("why"):
        parts.append(row["why"])
    for key, label in (("max_abs_diff", "max |diff|"), ("rel_error", "relative error"), ("cosine", "cosine"),
                       ("top1", "top-1 match"), ("topk", f"top-{TOP_K} overlap")):
        if row.get(key) is not None:
            parts.append(f"{label} {row[key]:.4g}")
    return ", ".join(parts)
