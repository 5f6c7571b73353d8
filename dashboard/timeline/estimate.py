"""How long a timeline run will take, before it starts: an estimate, said to be one.

Why: on the x86_64 HTP simulator one request of a real model takes seconds to tens of seconds
(a YOLOv8n detector: 10 to 50 s), so a workload that takes a minute on a device can take half an
hour here; a user must see that before pressing Run, and how to size the workload instead.

The costs of a run are three figures (``Costs``): a request on the fast backend, a request on the
target, and the target's session creation (the HTP compile). They come from a finished run of
the same model on the same hardware when there is one (*measured*), otherwise from the model's
size (*from the model's size*: weights and nodes, with coefficients fitted on the bundled samples
and on a YOLOv8n on the simulator, good to a factor of about three). ``estimate`` then walks the
strategies of ``TimelineOptions`` the way the runner serves them. While the run goes, the same
walk is redone on the figures it has measured so far (``calibrated``: its first compile and first
requests on each backend), for the time left and the count a paced workload will serve
(``timeline.remote.LiveRun``). No runtime, no Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.timeline.model import TimelineOptions, TimelineRun

MB = 1024 * 1024
# Per MiB of weights and per node, by the hardware the target runs on (seconds). Simulator:
# measured here on the bundled CNN (39 KiB: 33 ms per request, 0.1 s compile) and text encoder
# (0.6 MiB: 0.2 s per request, 0.14 s compile), and a YOLOv8n (12 MiB: 10 to 50 s per request).
SIZE_COSTS = {
    "simulator": {"target_request": (0.02, 1.2, 0.0), "target_create": (0.1, 1.5, 0.002),
                  "fast_request": (0.001, 0.004, 0.0)},
    "device": {"target_request": (0.001, 0.002, 0.0), "target_create": (0.3, 0.5, 0.002),
               "fast_request": (0.001, 0.004, 0.0)},
}
START_S = 3.0  # the worker's start and the priming (QNN libraries, reference outputs)
SPREAD = 3.0  # how far a size-based estimate may be off, either way


@dataclass(frozen=True)
class Costs:
    """Seconds per fast request, per target request, and for the target's session creation."""

    fast_request: float
    target_request: float
    target_create: float
    basis: str  # "from the model's size" or "measured in run ..."
    measured: bool = False


@dataclass(frozen=True)
class Estimate:
    seconds: float
    requests: int  # per strategy (a paced workload's count is itself estimated)
    swap_at: float | None  # when the migration would swap, seconds from its start
    costs: Costs

    def text(self) -> str:
        """What the page and the CLI say before a run: an estimate, and what it rests on."""
        low, high = (self.seconds, self.seconds) if self.costs.measured else \
            (self.seconds / SPREAD, self.seconds * SPREAD)
        span = "" if self.costs.measured else f" ({duration(low)} to {duration(high)})"
        return (f"Estimated duration: about {duration(self.seconds)}{span}, {self.requests} requests per "
                f"strategy; an estimate {self.costs.basis} (HTP request {duration(self.costs.target_request)}, "
                f"compile {duration(self.costs.target_create)}), not a measurement of this run.")


def costs_from_size(weight_bytes: int, nodes: int, hardware: str | None) -> Costs:
    table = SIZE_COSTS["simulator" if hardware == "simulator" else "device"]
    mib = weight_bytes / MB

    def cost(key: str) -> float:
        base, per_mib, per_node = table[key]
        return base + per_mib * mib + per_node * nodes

    where = "the HTP simulator" if hardware == "simulator" else "a device"
    return Costs(cost("fast_request"), cost("target_request"), cost("target_create"),
                 f"from the model's size ({_size(weight_bytes)} of weights, {nodes} nodes) on {where}")


def with_measured_compile(costs: Costs, seconds: float | None, hardware: str | None) -> Costs:
    """``costs`` with the HTP compile a partition analysis of the model measured (its HTP session
    creation, on the same kind of hardware), the rest still from the size."""
    if seconds is None or costs.measured:
        return costs
    where = "the HTP simulator" if hardware == "simulator" else "the device"
    return Costs(costs.fast_request, costs.target_request, seconds,
                 f"{costs.basis}, with the HTP compile measured by this model's partition analysis on {where}")


def costs_from_run(run: TimelineRun) -> Costs | None:
    """The costs a finished run measured (median service times per backend, the target's session
    creation), or None when it served nothing on the target."""
    fast_s, target_s, create_s = measured(run.strategies.values(), run.fast.get("backend", "cpu"),
                                          run.target.get("backend", "htp"))
    if target_s is None or create_s is None:
        return None
    return Costs(fast_s or 0.0, target_s, create_s, f"from the measured run {run.label}".rstrip(), measured=True)


def measured(strategies, fast: str, target: str, warmup_runs: int = 0) -> tuple[float | None, float | None,
                                                                                  float | None]:
    """What ``strategies`` (finished, or streaming in) measured so far: the median service time on
    the fast backend and on the target, and the target's median session creation (its compile, in
    the strategies that compile it); None where nothing was measured yet. With ``warmup_runs``,
    the target's warm-up stands for its requests until one is answered: they are its first runs."""
    latencies: dict[str, list[float]] = {}
    create, warm = [], []
    for strategy in strategies:
        for r in list(strategy.requests):
            if r.ok and r.latency is not None:
                latencies.setdefault(r.backend, []).append(r.latency)
        metrics = strategy.metrics
        created = metrics["session_create_s"].get(target)
        if created is not None and strategy.name in ("target", "migrate"):
            create.append(created)
        if warmup_runs and metrics["warmup_s"].get(target) is not None:
            warm.append(metrics["warmup_s"][target] / warmup_runs)
    target_s = _median(latencies.get(target, [])) or _median(warm)
    return _median(latencies.get(fast, [])), target_s, _median(create)


def calibrated(prior: Costs, strategies, fast: str, target: str, warmup_runs: int = 0) -> Costs:
    """``prior`` (the estimate before the run) with each figure this run has measured so far in its
    place: what the run's time left is estimated from as it goes. Why: a size-based estimate is
    good to a factor of about three at best (a YOLOv8n on the simulator: 2 min 37 s estimated, 21 s
    taken); the first compile and the first requests on each backend say what this model costs."""
    fast_s, target_s, create_s = measured(list(strategies), fast, target, warmup_runs)
    if fast_s is None and target_s is None and create_s is None:
        return prior
    said = [what for what, value in (("HTP compile", create_s), ("HTP requests", target_s),
                                     ("fast requests", fast_s)) if value is not None]
    return Costs(prior.fast_request if fast_s is None else fast_s,
                 prior.target_request if target_s is None else target_s,
                 prior.target_create if create_s is None else create_s,
                 f"calibrated on this run ({', '.join(said)} measured)", measured=None not in (target_s, create_s))


def paced(options: TimelineOptions) -> bool:
    """A workload paced until after the migration's swap (its count is decided by the swap)."""
    return options.after_swap > 0 and "migrate" in options.strategies


def paced_count(options: TimelineOptions, ready: float) -> int:
    """Requests per strategy of a paced workload whose migration swaps ``ready`` seconds in: those
    arriving until then, and ``after_swap`` more; at most ``options.requests``."""
    return min(options.requests, int(ready * options.rate) + 1 + options.after_swap)


def ready_s(options: TimelineOptions, costs: Costs) -> float:
    """When the target is compiled and warm: the migration's swap, a cold start's first answer."""
    return costs.target_create + options.warmup_runs * costs.target_request


def strategy_seconds(name: str, options: TimelineOptions, count: int, costs: Costs, ready: float | None = None) -> float:
    """One strategy's clock as the runner serves ``count`` requests (``ready``: when the target is
    warm, ``ready_s`` unless known)."""
    ready = ready_s(options, costs) if ready is None else ready
    return _strategy_seconds(name, count, options.rate, costs, ready, options.concurrency)


def estimate(options: TimelineOptions, costs: Costs) -> Estimate:
    """The run's duration: each strategy's clock as the runner serves it, plus the start."""
    ready = ready_s(options, costs)  # the target warmed: the swap
    count = paced_count(options, ready) if paced(options) else options.requests
    total = START_S
    for name in options.strategies:
        total += strategy_seconds(name, options, count, costs, ready)
    return Estimate(round(total, 1), count, round(ready, 3) if "migrate" in options.strategies else None, costs)


def _strategy_seconds(name: str, count: int, rate: float, costs: Costs, ready: float, concurrency: int) -> float:
    arrivals = (count - 1) / rate
    if name == "fast":
        return max(arrivals, count * costs.fast_request / concurrency) + costs.fast_request
    # The HTP serves one request at a time (the simulator shares the host's cores, a device's NPU
    # runs one graph at a time), so its requests add up whatever the concurrency.
    if name == "migrate":
        before = min(count, int(ready * rate) + 1)
        return max(ready + (count - before) * costs.target_request, arrivals)
    extra = costs.target_create if name == "cached" else 0.0  # the EPContext model is built once first
    return extra + max(ready + count * costs.target_request, arrivals)


def _size(n: int) -> str:
    return f"{n / MB:.1f} MiB" if n >= MB else f"{n / 1024:.0f} KiB"


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
