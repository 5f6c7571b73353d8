"""Sweep page: a sweep's results folder as a matrix of models × (SoC, setting set), a spec run in
the background, and the diff of two results folders.

What a page may open. A results folder or a spec is a path on the server, and a page may be
someone else's (``dashboard.access``), so the page never takes a typed path: it offers, by name,
the folders and specs the person who started the server named (``streamlit run app.py --
--sweep DIR_OR_SPEC``, repeatable) and those under the roots the operator allows
(``[sweeps] roots`` in the operator's config, ``QNN_LAB_SWEEP_ROOTS``). A spec run from the page
writes only where the server decides: ``<spec's folder>/<spec name>.results`` (run again, it
resumes there), its models must lie under the same root as the spec, and its provider options
must be ones a page may set (``qnn_options.check(origin=BROWSER)``: no library, no output path).

The matrix is coloured by the HTP coverage each partition cell measured (on the HTP simulator
here, never the NPU: the records say which hardware measured them), with the nodes left to the
CPU, the classifiers' verdicts and, for profiled cells, the HTP's total in the words of what it
is ("simulated HTP cycles" here: never a time) with its costliest node in each cell's text. A
cell opens its model on the Partitions page with that SoC and setting set, dims and shapes
included: they become the model's shared settings (``views.settings``), which every page and the
address bar follow (nothing runs until Apply).
"""

from __future__ import annotations

import argparse
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import access
from dashboard.errors import UserError
from dashboard.runtime import qnn_options
from dashboard.runtime.socs import hardware_label
from dashboard.views import jobs, state
from dashboard.views.safe import md, stamped_name

SLOT = "sweep_job"
SEARCH_DEPTH = 3  # folders below a root searched for specs and results folders
MAX_FOUND = 200
RESULTS_SUFFIX = ".results"
CLI_TAG = " (command line)"  # after the name of a folder or spec the command line gave
GOOD, PARTIAL, POOR = 0.999, 0.8, 0.0  # coverage shades: all on the HTP, most, less
ORDER = {"partition": 0, "classify": 1, "profile": 2, "accuracy": 3, "quantize": 4}  # a matrix cell's text: coverage first, as coloured


def sweep_arguments(argv: list[str] | None = None) -> list[Path]:
    """``--sweep PATH`` (repeatable) from the script arguments: the terminal's own folders/specs."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--sweep", action="append", default=[])
    given = parser.parse_known_args(sys.argv[1:] if argv is None else argv)[0].sweep
    return [Path(p).expanduser().resolve() for p in given]


def _is_results(folder: Path) -> bool:
    return (folder / "index.parquet").is_file() or (folder / "sweep.json").is_file()


def _walk(root: Path, depth: int = SEARCH_DEPTH):
    """Folders and files below ``root``, ``depth`` levels deep, symlinks not followed."""
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_symlink():
            continue
        yield entry
        if depth > 1 and entry.is_dir() and not _is_results(entry):
            yield from _walk(entry, depth - 1)


@dataclass(frozen=True)
class Offered:
    """What the page may open: results folders and specs, each by the name the page shows."""

    folders: dict[str, Path]
    specs: dict[str, Path]


def offered(argv: list[str] | None = None) -> Offered:
    folders: dict[str, Path] = {}
    specs: dict[str, Path] = {}
    for path in sweep_arguments(argv):
        if path.is_dir():
            folders[f"{path}{CLI_TAG}"] = path
        elif path.suffix == ".toml" and path.is_file():
            specs[f"{path}{CLI_TAG}"] = path
    for root in access.operator().sweep_roots:
        base = Path(root).expanduser().resolve()
        for entry in _walk(base):
            if len(folders) + len(specs) >= MAX_FOUND:
                break
            if entry.is_dir() and _is_results(entry):
                folders.setdefault(f"{root} › {entry.relative_to(base)}", entry)
            elif entry.suffix == ".toml" and entry.is_file():
                specs.setdefault(f"{root} › {entry.relative_to(base)}", entry)
    for name, spec in list(specs.items()):  # a spec's own results folder, once it ran, by its name on disk
        out = results_folder(spec)
        if _is_results(out) and out not in folders.values():
            tag = CLI_TAG if name.endswith(CLI_TAG) else ""
            folders[name.removesuffix(tag).removesuffix(spec.name) + out.name + tag] = out
    return Offered(folders, specs)


def results_folder(spec: Path) -> Path:
    """Where a page's run of ``spec`` writes: decided here, never typed."""
    return spec.parent / f"{spec.stem}{RESULTS_SUFFIX}"


# -- the page ------------------------------------------------------------------------------------------
def render() -> None:
    st.title("Sweep", anchor=False)
    st.caption("A model zoo × SoCs × setting sets: which models the HTP takes whole, what falls back to the "
               "CPU, and what changed between two runs. Coverage is **measured** on the hardware each record "
               "names (here the HTP simulator, never the NPU).")
    found = offered()
    if not found.folders and not found.specs:
        st.info("No sweep to open. Start the dashboard with `-- --sweep RESULTS_DIR` (or a spec), or have the "
                f"operator allow a folder ({access.SWEEP_ROOTS_ENV} or [sweeps] roots in "
                f"{md(access.config_path())}); `python -m dashboard sweep SPEC.toml --out DIR` fills one.",
                icon=":material/info:")
        return
    # Only the open tab runs (a tab switch reruns the page): the diff reads every record of two
    # folders, which the matrix, drawn from the index alone, must not wait for.
    views = {"Results": _results, "Run a spec": _run, "Diff two runs": _diff}
    for tab, draw in zip(st.tabs(list(views), key="sw_tab", on_change="rerun"), views.values()):
        if tab.open:
            with tab:
                draw(found)


def _load(folder: Path) -> pd.DataFrame:
    """The folder's index, read once per version of it (``_index``), with its notes shown."""
    from dashboard.sweep.store import Store

    frame, notes = _index(str(folder), Store(folder).identity())
    for note in notes[:5]:
        st.warning(md(note), icon=":material/warning:")
    return frame


@st.cache_data(max_entries=8, show_spinner=False)
def _index(folder: str, identity: tuple) -> tuple[pd.DataFrame, list[str]]:
    """``Store.index`` keyed by the index file's identity (name, mtime, size): a rerun of the page
    (a filter, a pick) reads nothing, and a sweep that rewrote the index is read afresh."""
    from dashboard.sweep.store import Store

    store = Store(folder)
    return store.index(), list(store.notes)


def _results(found: Offered) -> None:
    if not found.folders:
        st.info("No results folder yet: run a spec.", icon=":material/info:")
        return
    name = st.selectbox("Results folder", list(found.folders), key="sw_folder")
    folder = found.folders[name]
    try:
        frame = _load(folder)
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    if frame.empty:
        st.info("This folder has no cells yet.", icon=":material/info:")
        return
    frame = _filters(frame)
    hardware = sorted({hardware_label(h) for h in frame["hardware"].dropna().unique()})
    st.markdown(f"**{len(frame)} cells** · {int((frame['status'] == 'failed').sum())} failed · measured on "
                f"{md(', '.join(hardware) or 'no hardware (classify only)')}")
    st.dataframe(matrix(frame), key="sw_matrix")
    caption = ("Each cell: the HTP coverage of the partition cell (share of the model's nodes the HTP claims), "
               "the nodes left to the CPU, and the two classifiers' verdicts (EP rules / refined). Green: the whole "
               "model on the HTP; amber: most of it; red: less; grey: failed or not partitioned.")
    if (frame["analysis"] == "profile").any():
        caption += (" Profiled cells add the HTP's total, **measured** over the profile's runs, in the words of "
                    "what it is (simulated HTP cycles on the HTP simulator: a count of the simulator's cycles, "
                    "never a time and not a phone's NPU cycles), and its costliest node with its share.")
    st.caption(caption)
    _open_cell(frame, folder)
    failed = frame[frame["status"] == "failed"]
    if not failed.empty:
        with st.expander(f"Failed cells ({len(failed)})", icon=":material/error:"):
            st.dataframe(failed[["model", "soc", "option_set", "analysis", "reason"]], hide_index=True)
    _downloads(frame, folder)


def _downloads(frame: pd.DataFrame, folder: Path) -> None:
    """The filtered cells as CSV and Parquet, named after the results folder and the time its
    results were last written (one name across reruns, as every download's: ``safe.stamped_name``).
    The files are made when clicked, not on every rerun; a click must not rerun the page
    (``on_click="ignore"``, as the report's and the timeline's buttons): a rerun drops the file the
    click is fetching, and about 4 clicks in 10 gave no file ("Deferred file … not found")."""
    from datetime import datetime, timezone

    from dashboard.sweep.store import Store

    mtime_ns = Store(folder).identity()[1]
    written = datetime.fromtimestamp(mtime_ns / 1e9, timezone.utc) if mtime_ns else None  # None: now
    left, right = st.columns(2)
    left.download_button("Download CSV", lambda: frame.to_csv(index=False).encode(),
                         stamped_name(folder.name, "sweep", "csv", written), "text/csv",
                         icon=":material/download:", key="sw_csv", on_click="ignore")
    right.download_button("Download Parquet", lambda: _parquet(frame),
                          stamped_name(folder.name, "sweep", "parquet", written), "application/vnd.apache.parquet",
                          icon=":material/download:", key="sw_parquet", on_click="ignore")


def _parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _filters(frame: pd.DataFrame) -> pd.DataFrame:
    columns = st.columns(4)
    picks = {}
    for column, (field, label) in zip(columns, (("model", "Models"), ("soc", "SoCs"), ("option_set", "Setting sets"),
                                                 ("status", "Status"))):
        values = sorted(frame[field].dropna().unique())
        picks[field] = column.multiselect(label, values, default=values, key=f"sw_filter_{field}")
    keep = pd.Series(True, index=frame.index)
    for field, values in picks.items():
        keep &= frame[field].isin(values)
    return frame[keep]


def matrix(frame: pd.DataFrame):
    """Models × (SoC · setting set): each cell's text and its colour by HTP coverage (a Styler).
    One table whatever the sweep's size: each index row's text is made once, then the rows are
    joined per matrix cell (partition first, as coloured) and pivoted."""
    order = frame["analysis"].map(ORDER).fillna(len(ORDER))
    rows = frame.assign(column=frame["soc"] + " · " + frame["option_set"], _order=order).sort_values(
        ["model", "column", "_order"], kind="stable")
    rows = rows.assign(_text=[_part(row) for row in rows.itertuples()])
    measured = (rows["analysis"] == "partition") & (rows["status"] != "failed") & rows["htp_coverage"].notna()
    index, columns = sorted(rows["model"].unique()), sorted(rows["column"].unique())
    text = (rows.groupby(["model", "column"])["_text"].agg(lambda parts: " · ".join(p for p in parts if p))
            .unstack().reindex(index=index, columns=columns).fillna("").rename_axis(index=None, columns=None))
    coverage = (rows[measured].groupby(["model", "column"])["htp_coverage"].last().unstack()
                .reindex(index=index, columns=columns))

    def colour(_):
        return coverage.map(_shade)

    return text.style.apply(colour, axis=None)


def _part(row) -> str:
    """One index row's share of its matrix cell's text."""
    if row.status == "failed":
        return f"{row.analysis} failed"
    if row.analysis == "partition" and pd.notna(row.htp_coverage):
        return f"HTP {row.htp_coverage:.0%} · {int(row.cpu_nodes or 0)} on CPU"
    if row.analysis == "classify":
        return f"{row.verdict_ep} / {row.verdict_refined}"
    if row.analysis == "profile":
        return _profiled(row)
    if row.analysis in ("accuracy", "quantize"):
        return _accurate(row)
    return ""


def _accurate(row) -> str:
    """An accuracy or quantize cell's text: the worst output SQNR against float (on random inputs
    said), and for quantize the lifted tensors and the cycles ratio."""
    sqnr = getattr(row, "acc_sqnr_db", None)
    text = "no SQNR" if sqnr is None or pd.isna(sqnr) else f"{sqnr:.1f} dB"
    if row.analysis == "quantize":
        lifted, ratio = getattr(row, "q_lifted", None), getattr(row, "q_cycles_ratio", None)
        text = f"QDQ {text}" + ("" if lifted is None or pd.isna(lifted) else f" · {int(lifted)} lifted")
        text += "" if ratio is None or pd.isna(ratio) else f" · {ratio:.2f}× float cycles"
    else:
        text = f"fp16 {text}"
    if getattr(row, "data", None) == "random inputs":
        text += " (random inputs)"
    return text


def _profiled(row) -> str:
    """A profile cell's text: the HTP's total with what it is, and its costliest node's share."""
    total, label = getattr(row, "htp_total", None), getattr(row, "htp_label", None)
    if total is None or pd.isna(total) or not label:
        return "profiled (no HTP figures)"
    top, share = getattr(row, "top_node", None), getattr(row, "top_node_share", None)
    text = f"{_compact(total)} {label}"
    if top and share is not None and pd.notna(share):
        text += f" · top {_leaf(top)} {share:.0%}"
    return text


def _leaf(name: str) -> str:
    """A node's name without its name scope (``/layers.0/attention/MatMul`` -> ``…/MatMul``), so a
    matrix cell stays readable; the index and the records keep the whole name."""
    head, sep, leaf = name.rstrip("/").rpartition("/")
    return f"…/{leaf}" if sep and head else name


def _compact(value: float) -> str:
    """``12.7M``: a count of cycles short enough for a matrix cell (the index has it exact)."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}"
    return f"{value:.0f}"


def _shade(value: float) -> str:
    if pd.isna(value):
        return "background-color: #e0e0e0; color: #333"
    if value >= GOOD:
        return "background-color: #b7e1b0; color: #111"
    if value >= PARTIAL:
        return "background-color: #ffe08a; color: #111"
    return "background-color: #f4a6a6; color: #111"


def _open_cell(frame: pd.DataFrame, folder: Path) -> None:
    """Pick a cell and open its model on the Partitions page with its SoC and setting set."""
    rows = frame[frame["analysis"].isin(["partition", "profile"])].drop_duplicates(["model", "soc", "option_set"])
    if rows.empty:
        return
    labels = {f"{r.model} · {r.soc} · {r.option_set}": r.record for r in rows.itertuples()}
    with st.container(border=True):
        pick = st.selectbox("Open a cell on the Partitions page", list(labels), key="sw_open_pick")
        if st.button("Open on Partitions", icon=":material/call_split:", key="sw_open"):
            try:
                open_on_partitions(folder, labels[pick])
            except UserError as exc:
                st.error(md(exc), icon=":material/error:")


def open_on_partitions(folder: Path, record: str) -> None:
    """Select the cell's model and make the cell's settings (SoC, fp16, backends, optimization
    level, provider options, dims and shapes) that model's shared settings, the ones every page's
    form starts from and the link carries (``views.settings.remember_values``); the Partitions
    form shows them when it draws (nothing runs until Apply)."""
    from dashboard.runtime.knobs import KNOB
    from dashboard.sweep.store import Store
    from dashboard.views import settings as shared

    result = Store(folder).read(record)
    if result is None:
        raise UserError(f"the cell's record {record} cannot be read")
    cell = result.cell
    selected = state.select(cell.path, Path(cell.path).name, "path")
    if selected.digest != cell.digest:
        st.warning("The model changed since the sweep measured it: the Partitions page measures it as it is now.",
                   icon=":material/warning:")
    values = {key: getattr(cell.settings, key) for key in KNOB}
    values["dims"], values["shapes"] = dict(values["dims"]), dict(values["shapes"])
    values["provider_options"] = dict(values["provider_options"])
    _forget_widgets(selected.digest)
    shared.remember_values(selected.digest, values, "partition")
    st.switch_page("pages/partitions.py")


def _forget_widgets(digest: str) -> None:
    """Drop the Partitions form's own widget values for the model (left from an earlier visit this
    session), so its widgets draw from the shared settings just stored instead."""
    from dashboard.runtime.knobs import KNOB

    prefixes = tuple(f"pt_{knob.widget}_{digest}" for knob in KNOB.values())
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith(prefixes)]:
        del st.session_state[key]


# -- running a spec ------------------------------------------------------------------------------------
@dataclass
class SweepStep:
    """A sweep's progress as a job's step (``runtime.jobs.Step``)."""

    stage: str
    progress: float


def _run(found: Offered) -> None:
    job = jobs.current(SLOT)
    if job is not None:
        result = jobs.finished(SLOT, job, again="Start the sweep again to resume it.")
        if result is not None:
            st.success(f"Done: {md(result)}", icon=":material/check_circle:")
    if not found.specs:
        st.info("No spec to run: the command line or the operator's sweep roots name none.", icon=":material/info:")
        return
    with st.form("sw_run"):
        name = st.selectbox("Spec", list(found.specs), key="sw_spec")
        from dashboard.sweep.executors import default_jobs

        count = st.number_input("Cells at a time (local workers)", 1, max(default_jobs(), 1), 1, key="sw_jobs")
        started = st.form_submit_button("Run the sweep", type="primary", icon=":material/play_arrow:")
    st.caption("Results go to the spec's own folder, `<spec>.results` (a run again resumes there); cells run here "
               "on this machine's HTP simulator.")
    if started:
        spec = found.specs[name]
        try:
            work = sweep_work(spec, int(count))
        except UserError as exc:
            st.error(md(exc), icon=":material/error:")
            return
        jobs.start(SLOT, str(spec), f"Sweep {spec.name}", work)
        st.rerun()


def sweep_work(spec_path: Path, count: int):
    """The job's work: the spec checked now (one error before anything runs), its models under the
    spec's root, the cells into ``results_folder``, a real folder of this user's under the same
    root (``store.check_inside``: never a symlink out of it, checked now and as the job makes it)."""
    from dashboard.sweep.spec import load_spec
    from dashboard.sweep.store import Store, check_inside, run_sweep

    spec = load_spec(spec_path)
    root = access.operator().sweep_root_of(spec_path)
    base = Path(root).expanduser().resolve() if root else spec_path.parent
    outside = [m.name for m in spec.models if base != m.path and base not in m.path.parents]
    if outside and spec_path not in sweep_arguments():
        raise UserError(f"the spec names models outside {base}: {', '.join(outside[:3])}; a page runs only models "
                        "under the spec's sweep root")
    for name, knobs in spec.option_sets.items():  # the page's click runs it: what a page may set
        try:
            qnn_options.check(knobs.get("provider_options", {}), origin=access.BROWSER)
        except UserError as exc:
            raise UserError(f"option set {name!r}: {exc} (the command line may run this spec)") from None
    out = results_folder(spec_path)
    check_inside(out, base)  # a symlink planted at <spec>.results is refused before the job starts

    def work(on_event, cancel):
        def progress(p) -> None:
            eta = "" if p.eta is None else f", about {jobs.duration(p.eta)} left"
            on_event(SweepStep(f"{p.done}/{p.total} cells ({p.failed} failed){eta}", p.done / max(p.total, 1)))

        done = run_sweep(spec, Store(out, create=True, inside=base), jobs=count, on_progress=progress, cancel=cancel)
        return f"{done.done}/{done.total} cells, {done.ran} ran, {done.reused} reused, {done.failed} failed, in {out.name}"

    return work


# -- diff ----------------------------------------------------------------------------------------------
def _diff(found: Offered) -> None:
    if len(found.folders) < 2:
        st.info("Two results folders are needed for a diff.", icon=":material/info:")
        return
    names = list(found.folders)
    left, right, gates_column = st.columns([2, 2, 2])
    old = left.selectbox("Old (e.g. the release)", names, key="sw_diff_old")
    new = right.selectbox("New (e.g. the pull request)", names, index=1, key="sw_diff_new")
    gates = gates_column.text_input("Gates (--fail-on)", "coverage-drop=1,new-fallback,verdict-change", key="sw_gates",
                                    help="Also cycles-rise=PCT: a profile cell's HTP total rose by more than PCT "
                                         "percent (simulated HTP cycles against simulated HTP cycles only; they move "
                                         "a few percent run to run, so PCT above that, e.g. 10); "
                                         "accuracy-drop=DB: an accuracy or quantize cell's worst output SQNR fell by "
                                         "more than DB dB.")
    from dashboard.sweep.diff import render_text
    from dashboard.sweep.store import Store

    try:
        old_folder, new_folder = found.folders[old], found.folders[new]
        result = _diffed(str(old_folder), str(new_folder), gates, Store(old_folder).identity(),
                         Store(new_folder).identity())
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    tripped = result.tripped
    if tripped:
        st.error(f"{len(tripped)} change(s) trip a gate: `sweep diff` would exit 1.", icon=":material/error:")
    else:
        st.success("No gate trips: `sweep diff` would exit 0.", icon=":material/check_circle:")
    st.code("\n".join(render_text(result)), language=None)


@st.cache_data(max_entries=8, show_spinner=False)
def _diffed(old: str, new: str, gates: str, old_identity: tuple, new_identity: tuple):
    """``diff_folders`` (it reads every record of both folders) once per pair of index versions
    and gates: a rerun of the page, or the same pair picked again, reads nothing."""
    from dashboard.sweep.diff import diff_folders, parse_gates

    return diff_folders(old, new, parse_gates(gates))
