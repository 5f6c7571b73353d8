"""One self-contained HTML report per model, for sharing: no server, no network, one file.

What it holds: the model's facts, both classifiers' verdicts with every signal and its evidence,
each partition analysis (per-backend status and the hardware it was measured on, the classes,
the nodes that keep the model off the NPU, the op types, and a picture of the partition), and
each timeline run (the strategy comparison, its chart, and per strategy the Gantt and latency
charts). Everything is inline: CSS in a ``<style>``, pictures as SVG, charts as plotly figures
with plotly.js included once. Every model-derived string (node, tensor, file names, runtime
messages) is HTML-escaped, so a hostile name shows as text and runs nothing.

``partition_picture`` draws the partition as SVG (class shares and each plan's segment strip);
it is the one function to extend when a graph picture (e.g. from the Model Explorer viewer)
becomes available. Built by the CLI (``python -m dashboard report``) and by the pages' sidebar
download; no Streamlit here.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import datetime, timezone

from dashboard.classify.verdicts import Classification, explain_disagreement
from dashboard.intake.graph import ModelGraph
from dashboard.intake.overview import human_bytes, sizes
from dashboard.partition.plans import SEGMENT_LABELS, Plan
from dashboard.partition.report import CLASS_LABELS, CLASSES, FAILED, MEASURED, REMOVED, PartitionReport, op_type_table
from dashboard.render.partition_graph import BACKEND_COLORS, CLASS_COLORS
from dashboard.runtime.socs import SIMULATOR_NOTE, hardware_label
from dashboard.timeline.model import STRATEGY_TITLES, TimelineRun, strategy_table

STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1200px;color:#222;
padding:0 1rem;line-height:1.45}
h1{font-size:1.7rem;margin-bottom:.2rem}h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:2.4rem}
h3{margin-top:1.6rem}table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem;width:100%}
th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f4f4f6}.muted{color:#666;font-size:.9rem}.badge{display:inline-block;border-radius:.6rem;
padding:0 .55rem;font-size:.82rem;margin-left:.3rem}.measured{background:#d9f2e0}.predicted{background:#ffe8cc}
.failed{background:#fbd5d5}.simulator{background:#fff3bf}.note{background:#fff8e1;border-left:4px solid #f0b400;
padding:.5rem .8rem;margin:.8rem 0}.error{background:#fdecea;border-left:4px solid #d62728;padding:.5rem .8rem}
.cards{display:flex;gap:1rem;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:.5rem;padding:.7rem 1rem;
flex:1 1 260px}code{font-size:.85rem}nav a{margin-right:1rem}
table.signals td:nth-child(-n+5),table.signals th:nth-child(-n+5){white-space:nowrap}
table.signals td:nth-child(6){min-width:12rem}table.signals td:last-child{width:45%;min-width:18rem}
"""


@dataclass
class ReportInput:
    """What a report is built from (whatever of it the caller has)."""

    name: str  # what the user calls the model (a sample's title, a file name)
    path: str
    digest: str
    graph: ModelGraph
    classifications: tuple[Classification, Classification] | None = None  # (EP rules, refined)
    partitions: list[PartitionReport] = field(default_factory=list)
    timelines: list[TimelineRun] = field(default_factory=list)
    timeline_error: str | None = None  # why the timeline asked for could not run (the rest still reports)
    profiles: list = field(default_factory=list)  # profile.model.Profile: measured here or imported from AI Hub
    profile_error: str | None = None  # why the profile asked for could not run
    accuracy: list = field(default_factory=list)  # accuracy.model.AccuracyReport: the HTP against float on data
    accuracy_error: str | None = None  # why the accuracy asked for could not run
    generated: datetime = field(default_factory=lambda: datetime.now(timezone.utc))  # also in the file's name


REPORT_TEMPLATE = "plotly_white"  # explicit: importing Streamlit makes plotly's default its own "streamlit"
SIZE_NOTE = "Sizes are in binary units: 1 KiB = 1,024 bytes, 1 MiB = 1,048,576 bytes."


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def build_html(data: ReportInput) -> str:
    """The whole report as one HTML document."""
    sections = [("model", "Model", _model(data))]
    if data.classifications:
        sections.append(("classifier", "Classifier evidence", _classifier(*data.classifications)))
    sections.append(("partitions", "Partitions", "".join(_partition(r, data) for r in data.partitions)
                     or "<p class='muted'>No partition analysis in this report.</p>"))
    if data.profiles or data.profile_error:
        sections.append(("profile", "Where the time goes", _profiles(data.profiles, data.profile_error)))
    if data.accuracy or data.accuracy_error:
        sections.append(("accuracy", "Accuracy", _accuracies(data.accuracy, data.accuracy_error)))
    sections.append(("timeline", "Timeline", _timelines(data.timelines, data.timeline_error)))
    nav = "".join(f"<a href='#{key}'>{esc(title)}</a>" for key, title, _ in sections)
    body = "".join(f"<section id='{key}'><h2>{esc(title)}</h2>{content}</section>" for key, title, content in sections)
    plotly_js = _plotly_js() if data.timelines or data.profiles or data.accuracy else ""
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>QNN Backend Lab report: {esc(data.name)}</title><style>{STYLE}</style>{plotly_js}</head><body>"
            f"<h1>QNN Backend Lab report: {esc(data.name)}</h1>"
            f"<p class='muted'>Generated {data.generated:%Y-%m-%d %H:%M:%S} UTC · model digest "
            f"<code>{esc(data.digest)}</code> · {esc(SIZE_NOTE)}</p><nav>{nav}</nav>{body}</body></html>")


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return f"<script type='text/javascript'>{get_plotlyjs()}</script>"


def binary_size(count: int | None) -> str:
    """``1536`` -> ``1.5 KiB``: the report's sizes, by the pages' one rule (``human_bytes``)."""
    return human_bytes(count)


def number(value: object) -> str:
    """A value as a person reads it: floats to four significant digits (a float32 threshold of
    0.05 reads ``0.05``, not ``0.05000000074505806``); anything else as it is."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return "—" if value is None else str(value)


def _table(headers: list[str], rows: list[list[object]], raw: set[int] = frozenset(), css: str = "") -> str:
    """An HTML table; every cell escaped except the columns in ``raw`` (markup built here)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell if i in raw else esc(cell)}</td>" for i, cell in enumerate(row))
                   + "</tr>" for row in rows)
    klass = f" class='{css}'" if css else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# -- model ------------------------------------------------------------------------------------------
def _model(data: ReportInput) -> str:
    graph = data.graph
    facts = [["file", data.path], ["nodes", f"{len(graph.nodes):,}"], ["file size", binary_size(graph.file_bytes)],
             ["weights", binary_size(sizes(graph).weight_bytes)], ["producer", graph.producer or "—"],
             ["opsets", ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in graph.opsets.items())]]
    inputs = [[t.name, t.dtype, t.shape_text()] for t in graph.inputs]
    outputs = [[t.name, t.dtype, t.shape_text()] for t in graph.outputs]
    return (_table(["", ""], facts) + "<h3>Inputs</h3>" + _table(["name", "type", "shape"], inputs)
            + "<h3>Outputs</h3>" + _table(["name", "type", "shape"], outputs))


# -- classifier --------------------------------------------------------------------------------------
def _classifier(ep: Classification, refined: Classification) -> str:
    cards = "".join(_verdict_card(title, result) for title, result in (("EP rules", ep), ("Refined", refined)))
    why = explain_disagreement(ep, refined)
    agreement = (f"<p>Both classifiers say <b>{esc(ep.verdict)}</b> → {esc(ep.backend.upper())} backend.</p>"
                 if why is None else f"<div class='note'>{esc(why)}</div>")
    tables = "".join(f"<h3>{esc(title)}: signals</h3>" + _signals(result)
                     for title, result in (("EP rules", ep), ("Refined", refined)))
    return f"<p class='muted'><code>backend_type=auto</code> loads the GPU backend for GenAI models and the HTP " \
           f"(NPU) for everything else.</p>{agreement}<div class='cards'>{cards}</div>{tables}"


def _verdict_card(title: str, result: Classification) -> str:
    lines = [f"<b>{esc(title)}</b>: <b>{esc(result.verdict)}</b> → {esc(result.backend.upper())}",
             f"GenAI score {result.genai_score:g} · NonGenAI score {result.non_genai_score:g}"]
    if result.margin is not None:
        lines.append(f"margin {result.margin:g} ({esc(result.confidence)})")
    if result.early_exit:
        lines.append(f"early exit: {esc(result.early_exit)}")
    if result.explanation:
        lines.append(esc(result.explanation))
    return "<div class='card'>" + "<br>".join(lines) + "</div>"


def _signals(result: Classification) -> str:
    rows = []
    for sig in result.signals:
        status = "not reached" if not sig.reached else "fired" if sig.fired else "not fired"
        measured = "" if sig.value is None else f"{number(sig.value)} (threshold {number(sig.threshold)})"
        rows.append([sig.name, status, sig.side, f"{sig.weight:g}", f"{sig.score:g}", measured,
                     "; ".join(number(e) for e in sig.evidence)])
    return _table(["signal", "status", "side", "weight", "score", "measured", "evidence"], rows, css="signals")


# -- partitions --------------------------------------------------------------------------------------
def _partition(report: PartitionReport, data: ReportInput) -> str:
    """A partition report's section, titled by the model and its settings; the settings its hints
    name are worded as the pages' fields (the document is the dashboard's, whichever front end wrote it)."""
    from dashboard.partition.analysis import worded
    from dashboard.runtime.knobs import PAGE

    report = worded(report, PAGE)
    options = report.options
    title = " · ".join([data.name, "+".join(b.upper() for b in report.backends) or "no backend",
                        f"device {report.device or 'local'}", f"fp16 {'on' if options.fp16 else 'off'}",
                        f"SoC {options.soc or 'default'}", f"optimization level {options.optimization_level}"])
    out = [f"<h3>{esc(title)}</h3>", _input_settings(report, data.graph), "<div class='cards'>"]
    out += [_backend_card(name, backend) for name, backend in report.backends.items()]
    out.append("</div>")
    if report.classes.note:
        out.append(f"<p class='error'>{esc(report.classes.note)}</p>")
    else:
        counts = report.classes.counts()
        out.append(_table([CLASS_LABELS[c] for c in (*CLASSES, "removed")],
                          [[counts[c] for c in (*CLASSES, "removed")]]))
        out.append(partition_picture(report))
    out.append(_off_npu(report))
    htp, gpu = report.backends.get("htp"), report.backends.get("gpu")
    if htp and gpu and htp.nodes and gpu.nodes:
        rows = [[r.op_type, r.count, r.htp_supported, r.gpu_supported, r.removed, " | ".join(r.htp_reasons),
                 " | ".join(r.gpu_reasons)] for r in op_type_table(report.op_types, htp, gpu)]
        out.append("<details><summary>Op types</summary>" + _table(
            ["op type", "nodes", "HTP claims", f"GPU ({gpu.status}) claims", "removed", "HTP reasons", "GPU reasons"],
            rows) + "</details>")
    out += [f"<p class='muted'>Note: {esc(note)}</p>" for note in report.notes]
    return "".join(out)


def _input_settings(report: PartitionReport, graph: ModelGraph) -> str:
    """The shape settings of the analysis as a table: the graph inputs' dimensions (what a user
    sets) and explicit input shapes; dimensions that only name derived shapes are not settings."""
    own = {dim for tensor in graph.inputs for dim in tensor.symbolic_dims}
    rows = [[name, value] for name, value in report.dims.items() if name in own]
    rows += [[f"shape of {name}", str(list(shape))] for name, shape in report.options.shapes.items()]
    return _table(["input setting", "value"], rows) if rows else "<p class='muted'>No input dimension to set.</p>"


def _backend_card(name: str, backend) -> str:
    hardware = backend.runtime.get("hardware") if backend.status == MEASURED else None
    badge = f"<span class='badge {esc(backend.status)}'>{esc(backend.status)}</span>"
    if hardware:
        kind = "simulator" if hardware == "simulator" else "measured"
        badge += f"<span class='badge {kind}'>on the {esc(hardware_label(hardware))}</span>"
    lines = [f"<b>{esc(name.upper())}</b>{badge}"]
    if backend.nodes:
        claimed = sum(1 for v in backend.nodes.values() if v.supported)
        verb = "claims" if backend.status == MEASURED else "predicted to claim"
        lines.append(f"{verb} <b>{claimed} of {len(backend.nodes)}</b> nodes")
    lines.append(f"<span class='muted'>{esc(backend.source)}</span>")
    if hardware == "simulator":
        lines.append(f"<span class='muted'>{esc(SIMULATOR_NOTE)}</span>")
    if backend.status == FAILED:
        lines.append(f"<span class='error'>{esc(backend.suggestion or backend.error or 'failed')}</span>")
        if backend.suggestion and backend.error:
            lines.append(f"<details><summary>the runtime's message</summary><code>{esc(backend.error)}</code>"
                         "</details>")
    elif backend.suggestion:
        lines.append(esc(backend.suggestion))
    return "<div class='card'>" + "<br>".join(lines) + "</div>"


def _off_npu(report: PartitionReport) -> str:
    htp, gpu = report.backends.get("htp"), report.backends.get("gpu")
    if htp is None or not htp.nodes:
        return ""
    refused = [(n, v) for n, v in htp.nodes.items() if not v.supported and v.status != REMOVED]
    title = f"<h4>{len(refused)} node(s) keep the model off the NPU</h4>"
    rows = []
    for name, verdict in refused:
        g = gpu.nodes.get(name) if gpu else None
        rows.append([name, verdict.op_type, "—" if g is None else "claims" if g.supported else "refuses",
                     verdict.reason or ""])
    gpu_title = f"GPU ({gpu.status})" if gpu else "GPU"
    return title + (_table(["node", "op", gpu_title, "HTP reason"], rows) if rows else "")


def partition_picture(report: PartitionReport, width: int = 1000) -> str:
    """The partition as SVG: the share of each node class, and each plan's segments in execution
    order (width proportional to their node counts, coloured by where they run)."""
    counts = report.classes.counts()
    parts = [_bar_svg([(CLASS_LABELS[c], counts[c], CLASS_COLORS[c]) for c in (*CLASSES, "removed")],
                      "node classes", width)]
    for kind, plan in report.plans.items():
        parts.append(_strip_svg(kind, plan, width))
    return "<div>" + "".join(parts) + "</div>"


def _bar_svg(items: list[tuple[str, int, str]], title: str, width: int) -> str:
    total = max(sum(n for _, n, _ in items), 1)
    x, rects, legend = 0.0, [], []
    for i, (label, n, color) in enumerate(items):
        w = width * n / total
        if n:
            rects.append(f"<rect x='{x:.1f}' y='18' width='{w:.1f}' height='22' fill='{color}'>"
                         f"<title>{esc(label)}: {n}</title></rect>")
        legend.append(f"<rect x='{i * 190}' y='48' width='12' height='12' fill='{color}'/>"
                      f"<text x='{i * 190 + 16}' y='58' font-size='12'>{esc(label)} {n}</text>")
        x += w
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='66' role='img' "
            f"aria-label='{esc(title)}'><text x='0' y='12' font-size='12'>{esc(title)}</text>"
            + "".join(rects) + "".join(legend) + "</svg>")


def _strip_svg(kind: str, plan: Plan, width: int) -> str:
    total = max(sum(len(s.nodes) for s in plan.segments), 1)
    x, rects = 0.0, []
    for seg in plan.segments:
        w = width * len(seg.nodes) / total
        rects.append(f"<rect x='{x:.1f}' y='18' width='{max(w, 0.5):.1f}' height='22' "
                     f"fill='{BACKEND_COLORS.get(seg.backend, '#999')}' stroke='#fff' stroke-width='0.5'>"
                     f"<title>segment {seg.index}: {esc(SEGMENT_LABELS.get(seg.backend, seg.backend))}, "
                     f"{len(seg.nodes)} nodes, {seg.boundary_bytes:,} boundary bytes</title></rect>")
        x += w
    used = list(dict.fromkeys(s.backend for s in plan.segments))
    legend = "".join(f"<rect x='{i * 190}' y='48' width='12' height='12' fill='{BACKEND_COLORS.get(b, '#999')}'/>"
                     f"<text x='{i * 190 + 16}' y='58' font-size='12'>{esc(SEGMENT_LABELS.get(b, b))}</text>"
                     for i, b in enumerate(used))
    size = f"{plan.transfer_bytes:,} bytes" + ("" if plan.bytes_complete else " + unknown sizes")
    title = f"{kind} plan: {plan.segment_count} segment(s), boundary copies {size}"
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='66' role='img' "
            f"aria-label='{esc(title)}'><text x='0' y='12' font-size='12'>{esc(title)}</text>"
            + "".join(rects) + legend + "</svg>")


# -- profiles ---------------------------------------------------------------------------------------
PROFILE_NOTE = ("Simulated HTP cycles come from QNN's HTP simulator on this x86_64 host: they rank the ops of this "
                "graph against each other, they are not a phone's NPU cycles, and HTP ops overlap, so they are "
                "never turned into time. Shares are of each backend's own total.")


def _profiles(profiles: list, error: str | None = None) -> str:
    failed = f"<div class='note'><b>The profile could not run.</b> {esc(error)}</div>" if error else ""
    return failed + "".join(_profile(p) for p in profiles)


def _profile_figure(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f} cycles" if unit == "cycles" else f"{value:,.1f} µs"


def _profile(profile, top: int = 15) -> str:
    from dashboard.profile.model import summaries
    from dashboard.render.profile_views import top_nodes

    source = "imported from Qualcomm AI Hub" if profile.source == "imported" else "measured"
    out = [f"<h3>{esc(profile.model)}: {esc(source)}, {profile.runs} timed run(s)</h3>"]
    if any(b.ok and b.unit == "cycles" and "simulator" in b.hardware for b in profile.backends.values()):
        out.append(f"<div class='note'><b>Simulated cycles are not time.</b> {esc(PROFILE_NOTE)}</div>")
    rows = [[name.upper(), b.status, b.hardware, profile.label(name) if b.ok else "—",
             _profile_figure(b.total, b.unit) if b.ok else "—", b.runs, b.reason or "; ".join(b.notes) or ""]
            for name, b in profile.backends.items()]
    out.append(_table(["backend", "status", "hardware", "figures are", "total per run (median)", "runs",
                       "reason / notes"], rows))
    if profile.summary:  # whole-model figures (AI Hub's estimated inference time, load times, memory), once
        out.append("<p><b>Whole model</b></p>" + _table(
            ["figure", "value"], [[f.name, f"{f.value:,.0f} {f.unit}"] for f in profile.summary]))
    for name, b in profile.backends.items():
        nodes = profile.backend_nodes(name)
        if not b.ok or not nodes:
            continue
        out.append(f"<h4>{esc(name.upper())}: {esc(profile.label(name))}</h4>")
        node_rows = [[f"{n.share:.1%}", _profile_figure(n.median, n.unit), n.name, n.op_type,
                      ("inserted by the runtime" + (f" for {n.serves}" if n.serves else "")) if n.inserted
                      else f"fused group: {', '.join(n.members)}" if n.carrier else ""]
                     for n in profile.top(top, name)]
        out.append(_table(["share", "median", "node", "op type", ""], node_rows))
        for title, sums in summaries(nodes, top):
            out.append(f"<p><b>{esc(title)}</b></p>" + _table(
                ["share", "total", title[:-1], "nodes"],
                [[f"{share:.1%}", _profile_figure(median, unit), label, count]
                 for label, unit, count, median, share in sums]))
        out.append(_figure(top_nodes(profile, name)))
    if profile.unmatched:
        out.append(f"<div class='note'><b>{len(profile.unmatched)} layer(s) of the imported file match no node of "
                   f"the model.</b></div>")
        out.append(_table(["layer", "type", "compute unit", "µs"],
                          [[u.name, u.type, u.compute_unit, f"{u.value:,.1f}"] for u in profile.unmatched[:50]]))
    return "".join(out)


# -- accuracy ---------------------------------------------------------------------------------------
def _accuracies(reports: list, error: str | None = None) -> str:
    failed = f"<div class='note'><b>The accuracy could not run.</b> {esc(error)}</div>" if error else ""
    return failed + "".join(_accuracy(r) for r in reports)


def _db(value) -> str:
    return "—" if value is None else f"{value:.1f} dB"


def _accuracy(report, top: int = 15) -> str:
    """One accuracy report: its data, the verdicts, per comparison and output the figures, the
    layers' table and chart (``render.accuracy_figures``)."""
    from dashboard.render.accuracy_figures import layer_chart

    data = report.data
    out = [f"<h3>{esc(report.model)}" + (f" and {esc(report.quantized)}" if report.quantized else "") + "</h3>",
           f"<p>{esc(data.description or data.label)}</p>"]
    if data.random:
        out.append("<div class='note'><b>Random inputs.</b> No data was given: the figures say how the backends "
                   "differ on noise, not on the model's data.</div>")
    if any("simulator" in c.hardware.lower() for c in report.comparisons):
        out.append(f"<div class='note'><b>Measured on the HTP simulator.</b> {esc(SIMULATOR_NOTE)}. Its arithmetic "
                   "is the HTP's own op implementations, which is what these figures check.</div>")
    out += [f"<p>• {esc(v)}</p>" for v in report.verdicts] + [f"<p class='muted'>Note: {esc(n)}</p>" for n in report.notes]
    rows = []
    for c in report.comparisons:
        if not c.ok:
            rows.append([c.target, c.reference, c.hardware, "FAILED", "", "", "", c.reason])
            continue
        for o in c.outputs:
            m = o.overall
            rows.append([c.target, c.reference, c.hardware, o.name, _db(m.sqnr_db), number(m.cosine),
                         "—" if m.top1 is None else f"{m.top1:.1%}", m.note or ""])
    out.append(_table(["target", "reference", "measured on", "output", "SQNR", "cosine", "top-1", ""], rows))
    layers = report.layers
    if layers is not None:
        if not layers.ok:
            out.append(f"<div class='error'>The layers could not be measured: {esc(layers.reason)}</div>")
        else:
            out += [f"<p class='muted'>{esc(p)}</p>" for p in layers.partition]
            ranked = sorted((r for r in layers.rows if (r.layerwise or r.cumulative) is not None),
                            key=lambda r: r.layerwise if r.layerwise is not None else r.cumulative)[:top]
            out.append(_table(["node", "op type", "cumulative", "layerwise", "CPU EP cumulative", "why"],
                              [[r.node, r.op_type, _db(r.cumulative), _db(r.layerwise), _db(r.cpu_cumulative),
                                r.why or ""] for r in ranked]))
            out.append(_figure(layer_chart(report)))
    return "".join(out)


# -- timelines --------------------------------------------------------------------------------------
def _timelines(runs: list[TimelineRun], error: str | None = None) -> str:
    failed = f"<div class='note'><b>The timeline could not run.</b> {esc(error)}</div>" if error else ""
    if not runs:
        return failed or "<p class='muted'>No timeline run in this report.</p>"
    return failed + "".join(_timeline(run) for run in runs)


def _timeline(run: TimelineRun) -> str:
    from dashboard.render.timeline_figures import gantt, latency_scatter, run_labels, strategy_bars

    hardware = run.runtime.get("hardware")
    target = run.target.get("label", "") + (f" on the {hardware_label(hardware)}" if hardware else "")
    out = [f"<h3>{esc(run.label or 'run')}</h3>",
           f"<p>{esc(run.device.get('label', 'local'))} · fast backend {esc(run.fast.get('label', ''))} · target "
           f"{esc(target)} · {run.workload.get('requests')} requests at {run.workload.get('rate')}/s</p>"]
    if hardware == "simulator":
        out.append(f"<div class='note'><b>Simulator latency is not NPU latency.</b> {esc(SIMULATOR_NOTE)}. A run "
                   "on a Snapdragon device measures the NPU itself.</div>")
    rows = [[r["title"], r["backends"], _ms(r["first_response_s"]), _ms(r["swap_at_s"]), _ms(r["p50_before_s"]),
             _ms(r["p50_after_s"]), _ms(r["p99_s"]), number(r["throughput_rps"]), r["failed"]] for r in strategy_table(run)]
    out.append(_table(["strategy", "backends", "first response", "swap at", "p50 before", "p50 after", "p99",
                       "req/s", "failed"], rows))
    out.append(_figure(strategy_bars([(run.label, run)])))
    labels = run_labels(run)
    for name, strategy in run.strategies.items():
        out.append(f"<h4>{esc(STRATEGY_TITLES.get(name, name))}</h4>")
        out.append(_figure(gantt(strategy, labels)) + _figure(latency_scatter(strategy, labels)))
    return "".join(out)


def _figure(fig) -> str:
    """A chart as it should look whatever plotly's default template is (the dashboard's Streamlit
    makes it one whose placeholder colours would leak in): an explicit template, and margins that
    grow to fit the axis and Gantt labels instead of the figures' tight on-page ones."""
    import plotly.io as pio

    fig.update_layout(template=pio.templates[REPORT_TEMPLATE], margin_autoexpand=True)
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})


def _ms(value) -> str:
    return "—" if value is None else f"{value * 1000:.2f} ms" if value < 1 else f"{value:.3f} s"
