"""Timeline page: hot migration (seed 000) and the alternatives a user would pick, measured on the
same workload on a real device (or this host's HTP simulator), live while it runs.

A run is a background job (``dashboard.views.jobs``, the same runner as a partition analysis), keyed
by the model's digest, the options and the device: the page stays usable while it runs, leaving
the page and coming back neither stops it nor loses it, and Cancel stops its worker at once. While
it runs, the progress bar counts answered requests with the time elapsed and an estimate of the
time left, and the latency chart and Gantt of the strategy being served grow as the worker
streams its events. Afterwards: the strategy comparison (table and bars), per strategy the Gantt
of sessions and phases, the per-request latency coloured by backend with the swap marked, the
events with the runtime's reasons, and whether outputs agreed. Runs stay in the session, each
shown only with its own model, download as JSON/CSV and can be compared. A run measured on the
x86_64 HTP simulator says so next to its charts (and in the HTP's chart label): its latencies are
the simulator's, not an NPU's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime, timezone

import pandas as pd
import streamlit as st

from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.shapes import is_float_model
from dashboard.render.timeline_figures import backend_labels, gantt, latency_scatter, run_labels, strategy_bars
from dashboard.runtime.jobs import Job
from dashboard.runtime.socs import SIMULATOR_NOTE, hardware_label
from dashboard.timeline.estimate import Estimate, costs_from_run, costs_from_size, estimate, with_measured_compile
from dashboard.timeline.model import (COSINE_AGREE, DEFAULT_ATOL, DEFAULT_RTOL, POLICIES, STRATEGIES, STRATEGY_TITLES,
                                      TOP_K, StrategyRun, TimelineOptions, TimelineRun, cached_vs_cold,
                                      default_workload, events_csv, metrics_csv, requests_csv, strategy_table)
from dashboard.timeline.remote import LiveRun, run_on_device, target_hardware
from dashboard.views import jobs, partitions, shape_hints, state
from dashboard.views.devices import select_device
from dashboard.views.settings import SettingsForm
from dashboard.views.safe import download_name, md, short

_RUNS = "timeline_runs"  # [{"label", "data": TimelineRun JSON, "finished": UTC datetime, "digest", ...}], oldest first
_SHOWN = "timeline_shown"  # model digest -> label of the run shown for it
_JOB = "timeline_job"
AGAIN = "Run the timeline again to restart."
FAST_CHOICES = {"auto": "device's QNN GPU, else CPU EP", "cpu": "CPU EP", "gpu": "QNN GPU"}
POLICY_TITLES = {"always": "always swap once warm (seed behaviour)",
                 "if_faster": "swap only if the warmed target is measured faster"}


def session_runs(model_path: str) -> Callable[[], list[TimelineRun]]:
    """The timeline runs this session has of the model at ``model_path`` (for the HTML report and
    Compare), as a function that reads them when called (see ``partitions.session_reports``)."""
    collect()
    store: list = st.session_state.setdefault(_RUNS, [])
    return lambda: [dataclasses.replace(TimelineRun.from_json(r["data"]), label=r["label"])
                    for r in list(store) if r["data"].get("model") == model_path]


def render() -> None:
    selected = state.require_model()
    graph = state.loaded_graph()
    st.title("Migration timeline", anchor=False)
    st.caption(f"{md(selected.name, 120)} · serve on the fast backend at once, compile and warm the HTP in the "
               "background, swap when warm — compared with fast only, HTP only, a cached EPContext model and "
               "the auto choice, on the same open-loop workload")
    device = select_device("Device", key="tl_device")
    hardware = target_hardware(device)
    try:
        options = _knobs(graph, selected.digest, hardware)
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        options = None
    shape_hints.show(graph, options)
    guess = _estimate(graph, selected.digest, options, hardware) if options is not None else None
    if st.button("Run timeline", type="primary", icon=":material/play_arrow:", disabled=options is None,
                 key="tl_run"):
        _start(device, selected, options, guess)
    if options is not None:
        _snippet(selected.path, options)
    _progress(selected)
    _results(selected)


def _snippet(model_path: str, options: TimelineOptions) -> None:
    """This run's hot migration as a script to paste (``timeline.snippet``): same sessions, options
    and workload."""
    from dashboard.timeline.snippet import model_timeline_snippet

    with st.expander("Reproduce outside the dashboard (Python)", icon=":material/code:"):
        try:
            st.code(model_timeline_snippet(model_path, options), language="python")
        except UserError as exc:
            st.error(md(exc), icon=":material/error:")


# -- knobs -------------------------------------------------------------------------------------------
def _knobs(graph: ModelGraph, digest: str, hardware: str) -> TimelineOptions:
    """The workload's widgets start at the defaults of the hardware (``timeline.model.WORKLOADS``):
    a small workload paced until after the swap on the simulator, 40 requests of every strategy on
    a device. Keyed by model and hardware, so picking a device of the other kind starts over."""
    default = default_workload(hardware)
    key = f"{digest}_{hardware}"
    # The strategies get a row of their own: in a narrow column the box folds chips into "+2".
    strategies = st.multiselect("Strategies", STRATEGIES, default=default["strategies"], key=f"tl_strategies_{key}",
                                format_func=lambda s: STRATEGY_TITLES[s])
    top = st.columns([1, 1, 1, 1, 2], vertical_alignment="bottom")
    after = top[0].number_input("Requests after the swap", min_value=0, max_value=10_000, value=default["after_swap"],
                                key=f"tl_after_{key}",
                                help="0: serve exactly 'Requests'. More: pace the workload at the rate until this "
                                     "many requests arrived after the migration's swap (at most 'Requests'); every "
                                     "strategy then serves that many, so the run always shows serving after the swap")
    requests = top[1].number_input("Requests", min_value=1, max_value=100_000, value=default["requests"], step=10,
                                   key=f"tl_requests_{key}",
                                   help="Per strategy; with requests after the swap, the most a strategy serves")
    rate = top[2].number_input("Rate (req/s)", min_value=0.1, max_value=10_000.0, value=default["rate"], step=5.0,
                               key=f"tl_rate_{key}", help="Open loop: request i arrives at i / rate")
    concurrency = top[3].number_input("In flight", min_value=1, max_value=64, value=2, key=f"tl_conc_{digest}",
                                      help="Requests served at once (what a swap has to drain)")
    fast = top[4].selectbox("Fast backend", list(FAST_CHOICES), format_func=FAST_CHOICES.get,
                            key=f"tl_fast_{digest}")
    form = SettingsForm("tl", digest, graph, analysis="timeline", defaults={"fp16": is_float_model(graph)},
                        model=digest)  # the model's settings, shared with every page (views.settings)
    with st.expander("Session options, policy, shared memory, tolerance", icon=":material/tune:"):
        left, mid, right = st.columns([2, 2, 3], gap="medium")
        with left:
            form.draw("fp16", "soc", "optimization_level")
            policy = st.radio("Swap policy", POLICIES, format_func=POLICY_TITLES.get, key=f"tl_policy_{digest}")
        with mid:
            shared = st.toggle("HTP shared memory (zero-copy I/O)", key=f"tl_shm_{digest}",
                               help="enable_htp_shared_memory_allocator=1 and IOBinding in the QNN device's "
                                    "HOST_ACCESSIBLE memory (seed 001); needs rpcmem on a Snapdragon device")
            warmup = st.number_input("Warm-up runs", min_value=1, max_value=100, value=3, key=f"tl_warm_{digest}")
            atol = st.number_input("Output atol", min_value=0.0, value=DEFAULT_ATOL, format="%g",
                                   key=f"tl_atol_{digest}")
            rtol = st.number_input("Output rtol", min_value=0.0, value=DEFAULT_RTOL, format="%g",
                                   key=f"tl_rtol_{digest}")
            form.draw("timeout")
        with right:
            form.draw("provider_options", "dims", "shapes")
    return form.settings(TimelineOptions, fast=None if fast == "auto" else fast, strategies=list(strategies),
                         requests=int(requests), rate=float(rate), after_swap=int(after),
                         concurrency=int(concurrency), policy=policy,
                         warmup_runs=int(warmup), shared_memory=shared, atol=float(atol), rtol=float(rtol))


def _estimate(graph: ModelGraph, digest: str, options: TimelineOptions, hardware: str) -> Estimate:
    """Before Run: how long it will take, from this model's last run on the same kind of hardware
    when there is one, else from the model's size; always labelled an estimate."""
    costs = None
    for entry in reversed([r for r in st.session_state.get(_RUNS, []) if r.get("digest") == digest]):
        run = dataclasses.replace(TimelineRun.from_json(entry["data"]), label=entry["label"])
        if (run.runtime.get("hardware") == "simulator") == (hardware == "simulator"):
            costs = costs_from_run(run)
            if costs is not None:
                break
    if costs is None:
        costs = with_measured_compile(costs_from_size(graph.weight_bytes, len(graph.nodes), hardware),
                                      _measured_compile(digest, options, hardware), hardware)
    guess = estimate(options, costs)
    st.caption(md(guess.text()))
    if hardware == "simulator" and not options.after_swap and "migrate" in options.strategies:
        st.caption("On the simulator the HTP compiles for seconds to minutes: with 'Requests after the swap' at 0 "
                   "the workload may end before the swap, and nothing is served after it.")
    return guess


def _measured_compile(digest: str, options: TimelineOptions, hardware: str) -> float | None:
    """The HTP session creation a partition analysis of this model measured with the same
    precision and SoC on the same kind of hardware (the Partitions page's store), if any."""
    for report in reversed(partitions.session_reports(digest)()):
        htp = report.backends.get("htp")
        if (htp is None or htp.status != "measured" or htp.seconds is None
                or (htp.runtime.get("hardware") == "simulator") != (hardware == "simulator")):
            continue
        if (report.options.fp16, report.options.soc) == (options.fp16, options.soc):
            return htp.seconds
    return None


# -- a run in the background ------------------------------------------------------------------------
def run_key(digest: str, options: TimelineOptions, device) -> str:
    """What a run computes: the model (by digest), the options and the device."""
    return f"{digest}|{json.dumps(options.to_json(), sort_keys=True)}|{device.url}"


def _start(device, selected, options: TimelineOptions, guess: Estimate | None = None) -> Job:
    """The run as the page's job (one at a time: a run still going is cancelled first). Its result
    is the session's entry for the run, labelled when it is collected. ``guess``, the estimate
    before the run, is where its progress starts: its count and costs, calibrated as it goes."""

    def work(on_event, cancel) -> dict:
        run = run_on_device(device, selected.path, options, on_event=on_event, timeout=options.timeout, cancel=cancel,
                            digest=selected.digest)
        return {"data": run.to_json(), "finished": datetime.now(timezone.utc), "digest": selected.digest,
                "name": selected.name, "device": device.label}

    return jobs.start(_JOB, run_key(selected.digest, options, device),
                      f"Timeline of {short(selected.name, 40)} on {device.label}", work,
                      tracker=LiveRun(options, per_strategy=guess.requests if guess else None,
                                      costs=guess.costs if guess else None))


def collect() -> None:
    """The finished job's run into the session's runs, once, as the run shown for its model. Called
    by every page (through the report's ``session_runs``), so a run that ends while the user is on
    another page is kept all the same."""
    job = jobs.current(_JOB)
    if job is None or not job.done or job.result is None:
        return
    runs: list = st.session_state.setdefault(_RUNS, [])
    entry = job.result
    if any(r is entry for r in runs):
        return
    entry["label"] = (f"#{len(runs) + 1} {short(entry['name'], 40)} · {entry['device']} · "
                      f"{entry['finished'].astimezone():%H:%M:%S}")
    runs.append(entry)
    st.session_state.setdefault(_SHOWN, {})[entry["digest"]] = entry["label"]


def _progress(selected) -> None:
    """The page's job: running (also one of another model: its title names it), with its live
    chart and Cancel; finished, its run collected before the runs are drawn (one reading of
    ``done``: a job that ends while the page is drawn is either still running here, and its
    fragment reruns the page, or collected), and for this model how it ended."""
    job = jobs.current(_JOB)
    if job is None:
        return
    if not job.done:
        jobs.show(_JOB, _live)
        return
    collect()
    if not job.key.startswith(f"{selected.digest}|"):
        return
    if job.result is None:
        jobs.outcome(job, AGAIN)
    elif job.count is not None:
        st.caption(f"Done: {job.count[0]}/{job.count[1]} requests answered in {jobs.duration(job.elapsed)}.")


def _live(job: Job) -> None:
    """The strategy being served, as it streams in: its Gantt and per-request latency."""
    live: LiveRun = job.tracker
    if live.answered and live.costs_text():
        st.caption(md(live.costs_text()))
    streaming = live.strategies.get(live.current) if live.current else None
    if streaming is None:
        return
    # A copy: the job's thread appends to the run while this draws it.
    strategy = StrategyRun(name=streaming.name, backends=dict(streaming.backends), events=list(streaming.events),
                           requests=list(streaming.requests))
    labels = backend_labels(live.fast, live.target)
    end = max([e.t for e in strategy.events] + [r.end or 0.0 for r in strategy.requests] + [0.0])
    st.plotly_chart(gantt(strategy, labels, end=end), key="tl_live_gantt")
    st.plotly_chart(latency_scatter(strategy, labels), key="tl_live_lat")


# -- results -----------------------------------------------------------------------------------------
def _results(selected) -> None:
    """The runs of the selected model (never another model's), the one picked last shown."""
    runs = [r for r in st.session_state.get(_RUNS, []) if r.get("digest") == selected.digest]
    if not runs:
        st.info("No run yet: pick the strategies and workload, then **Run timeline**.", icon=":material/timeline:")
        return
    labels = [r["label"] for r in runs]
    shown: dict = st.session_state.setdefault(_SHOWN, {})
    pick = f"tl_shown_pick_{selected.digest}"
    st.session_state[pick] = shown.get(selected.digest) if shown.get(selected.digest) in labels else labels[-1]
    label = st.selectbox("Run", labels, key=pick, on_change=_picked, args=(selected.digest, pick))
    shown[selected.digest] = label
    entry = next(r for r in runs if r["label"] == label)
    data = entry["data"]
    run = dataclasses.replace(TimelineRun.from_json(data), label=label)
    _summary(run)
    _simulator_note(run)
    _comparison(run)
    _strategies(run)
    _shared_memory(run)
    _downloads(run, data, selected.path, entry.get("finished"))
    if len(runs) > 1:
        _compare_runs(runs, selected.digest)


def _picked(digest: str, key: str) -> None:
    st.session_state.setdefault(_SHOWN, {})[digest] = st.session_state[key]


def _simulator_note(run: TimelineRun) -> None:
    """Next to the charts: what the HTP figures of a simulator run are, and what a device shows."""
    if run.runtime.get("hardware") != "simulator":
        return
    st.warning(f"**Simulator latency is not NPU latency.** Every HTP figure here was measured on the "
               f"{hardware_label('simulator')}: {SIMULATOR_NOTE}. So a slower HTP, a lower throughput after the "
               "swap or a long finalize here do not mean migration makes serving slower. Run on a Snapdragon device "
               "(add it on the Devices page and pick it above) to measure the NPU itself: its latency per request, "
               "what the swap does to throughput, and how long QNN takes to finalize and warm up there.",
               icon=":material/science:")


def _summary(run: TimelineRun) -> None:
    fast, workload = run.fast, run.workload
    target = run.target.get("label", "")
    hardware = run.runtime.get("hardware")
    if hardware:
        target += f" on the {hardware_label(hardware)}"
    st.markdown(f"**{md(run.device.get('label', 'local'))}** · fast backend **{md(fast.get('label', ''))}** · target "
                f"**{md(target)}** · {workload.get('requests')} requests at "
                f"{workload.get('rate')}/s, {workload.get('concurrency')} in flight · inputs: "
                f"{md(workload.get('inputs', ''))}")
    if "no QNN GPU" in fast.get("label", ""):
        st.info("This host has no QNN GPU: the fast backend is ONNX Runtime's **CPU EP (no QNN GPU on this host)**. "
                "Its figures stand in for a GPU and are not GPU measurements; attach a Snapdragon device on the "
                f"Devices page for those. (Why: {md(fast.get('reason', ''))})", icon=":material/info:")
    runtime = run.runtime
    soc = {k: v for k, v in runtime.get("soc", {}).items() if k != "ep_devices"}
    soc_text = ", ".join(f"{k} {v}" for k, v in soc.items()) or "not reported by this host"
    st.caption(f"onnxruntime {md(runtime.get('onnxruntime', '?'))} · onnxruntime-qnn "
               f"{md(runtime.get('onnxruntime_qnn', '?'))} · QNN SDK {md(runtime.get('qnn_sdk', '?'))} · SoC: "
               f"{md(soc_text, 120)}. Runtime primed once before the strategies ({run.prime.get('seconds', 0):.2f} s: "
               "QNN libraries, CPU reference outputs), so each strategy's clock starts equal.")


def _ms(value) -> str:
    return "—" if value is None else f"{value * 1000:.2f} ms" if value < 1 else f"{value:.3f} s"


def _comparison(run: TimelineRun) -> None:
    st.subheader("Strategies compared", anchor=False)
    rows = strategy_table(run)
    table = pd.DataFrame([{
        "strategy": r["title"], "backends": r["backends"], "first response": _ms(r["first_response_s"]),
        "swap at": _ms(r["swap_at_s"]), "p50 before": _ms(r["p50_before_s"]), "p50 after": _ms(r["p50_after_s"]),
        "p95": _ms(r["p95_s"]), "p99": _ms(r["p99_s"]), "p99 arrival→answer": _ms(r["response_p99_s"]),
        "req/s": r["throughput_rps"], "failed": r["failed"], "session create": _ms(r["create_s"]),
        "warm-up": _ms(r["warmup_s"])} for r in rows])
    st.dataframe(table, hide_index=True, width="stretch")
    _after_swap(run)
    explained = cached_vs_cold(run)
    if explained:
        st.info(explained, icon=":material/cached:")
    st.plotly_chart(strategy_bars([(run.label, run)]), key="tl_bars")


def _after_swap(run: TimelineRun) -> None:
    """What the hot migration served after its swap, or why nothing: the point of the feature."""
    migrate = run.strategies.get("migrate")
    if migrate is None:
        return
    m = migrate.metrics
    labels = run_labels(run)
    target = labels.get(run.target.get("backend", "htp"), "the target")
    if m["swap_at_s"] is None:
        return  # a failed or skipped migration says so in its tab
    after = [r for r in migrate.requests if r.ok and r.start is not None and r.start >= m["swap_at_s"]]
    if after:
        st.success(f"Hot migration swapped at {_ms(m['swap_at_s'])}: {len(after)} request(s) served after the swap on "
                   f"{md(target)} (p50 {_ms(m['p50_after_s'])}), {len(migrate.requests) - len(after)} before it on "
                   f"{md(labels.get(run.fast.get('backend', ''), 'the fast backend'))}.", icon=":material/swap_horiz:")
    else:
        st.warning(f"The swap came at {_ms(m['swap_at_s'])}, after the last request had started: nothing was served "
                   "after it. Set **Requests after the swap** (the workload is then paced until that many arrive "
                   "after it), or more requests at a lower rate.", icon=":material/warning:")


def _strategies(run: TimelineRun) -> None:
    st.subheader("Timelines", anchor=False)
    labels = run_labels(run)
    names = list(run.strategies)
    for name, tab in zip(names, st.tabs([STRATEGY_TITLES.get(n, n) for n in names])):
        strategy = run.strategies[name]
        m = strategy.metrics
        with tab:
            for event in strategy.events:
                if event.kind in ("migration_failed", "session_failed"):
                    st.error(f"{md(event.kind.replace('_', ' '))} at {event.t:.3f} s on {md(event.backend)}: "
                             f"{md(event.detail)}", icon=":material/error:")
                elif event.kind in ("migration_skipped", "shared_memory", "auto_choice"):
                    st.info(f"{md(event.kind.replace('_', ' '))}: {md(event.detail)}", icon=":material/info:")
            st.plotly_chart(gantt(strategy, labels), key=f"tl_gantt_{name}")
            st.plotly_chart(latency_scatter(strategy, labels), key=f"tl_lat_{name}")
            cells = [("answered", f"{m['expected'] - m['failed']}/{m['expected']}"),
                     ("lost / twice", f"{m['lost']} / {m['duplicated']}"),
                     ("swap drain", _ms(m["swap_drain_s"])), ("in flight at swap", m["swap_in_flight"]),
                     ("QNN finalize", _ms(sum(m["finalize_s"].values()) if m["finalize_s"] else None))]
            for column, (title, value) in zip(st.columns(len(cells)), cells):
                column.metric(title, value)
            _outputs(strategy.outputs)
            for note in strategy.notes:
                st.caption(md(note))
            with st.expander("Events"):
                st.dataframe(pd.DataFrame([e.to_json() for e in sorted(strategy.events, key=lambda e: e.t)]),
                             hide_index=True, width="stretch")


def _outputs(outputs: dict) -> None:
    checks = [c for c in outputs.get("checks", []) if c.get("compared")]
    if not checks:
        return
    verdict = "agree" if outputs.get("agree") else "**differ**"
    st.markdown(f"Outputs {verdict}, each output on its own: within |a − b| ≤ {outputs['atol']:g} + "
                f"{outputs['rtol']:g}·|b| everywhere, or a relative error ‖a − b‖/‖b‖ within {outputs['rtol']:g} "
                f"and a cosine similarity of at least {COSINE_AGREE:g} (top-1 and top-{TOP_K} agreement shown for "
                "class scores):")
    rows = [{"compared": f"{c['a']} vs {c['b']}", "input sets": c["compared"], "output": short(row["name"], 60),
             "agree": row.get("agree"), "max |diff|": row.get("max_abs_diff"),
             "relative error": row.get("rel_error"), "cosine": row.get("cosine"), "top-1 match": row.get("top1"),
             f"top-{TOP_K} overlap": row.get("topk")}
            for c in checks for row in c.get("outputs") or [{"name": "all", "agree": c["agree"],
                                                               "max_abs_diff": c["max_abs_diff"]}]]
    frame = pd.DataFrame(rows).dropna(axis=1, how="all")
    st.dataframe(frame.astype(object).where(frame.notna(), "—"), hide_index=True, width="stretch")


def _shared_memory(run: TimelineRun) -> None:
    shared = run.shared_memory
    if not shared.get("requested"):
        return
    st.subheader("HTP shared memory (seed 001)", anchor=False)
    if not shared.get("available"):
        st.warning(f"Not available on {md(run.device.get('label', 'this device'))}: {md(shared.get('reason'))}",
                   icon=":material/memory:")
    elif "comparison_error" in shared:
        st.warning(f"The allocator loaded but binding failed: {md(shared['comparison_error'])}")
    else:
        left, right = st.columns(2)
        left.metric("copy (plain run) p50", _ms(shared.get("copy_p50_s")))
        right.metric("zero-copy (IOBinding in QnnHtpShared) p50", _ms(shared.get("zero_copy_p50_s")))


def _downloads(run: TimelineRun, data: dict, model_path: str, when: datetime | None) -> None:
    """Named after the model and when the run finished (one name across reruns)."""
    columns = st.columns(4)
    for column, (title, kind, ext, content, key) in zip(columns, (
            ("Run (JSON)", "timeline", "json", json.dumps(data, indent=1), "tl_dl_json"),
            ("Requests (CSV)", "timeline-requests", "csv", requests_csv(run), "tl_dl_requests"),
            ("Comparison (CSV)", "timeline-comparison", "csv", metrics_csv(run), "tl_dl_metrics"),
            ("Events (CSV)", "timeline-events", "csv", events_csv(run), "tl_dl_events"))):
        column.download_button(title, content, file_name=download_name(model_path, kind, ext, when),
                               mime="application/json" if ext == "json" else "text/csv",
                               icon=":material/download:", key=key, on_click="ignore")


def _compare_runs(runs: list[dict], digest: str) -> None:
    st.subheader("Compare runs", anchor=False)
    labels = [r["label"] for r in runs]
    picked = st.multiselect("Runs", labels, default=labels[-2:], key=f"tl_compare_{digest}")
    chosen = [dataclasses.replace(TimelineRun.from_json(r["data"]), label=r["label"])
              for r in runs if r["label"] in picked]
    if len(chosen) < 2:
        st.caption("Pick two or more runs.")
        return
    rows = [{"run": run.label, **row} for run in chosen for row in strategy_table(run)]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.plotly_chart(strategy_bars([(run.label, run) for run in chosen]), key="tl_compare_bars")
