"""A sweep's results folder, and the runner that fills it as cells finish.

The folder (``--out DIR``)::

    DIR/sweep.json          what ran: the spec, the project version, when, how many cells (ran, reused, failed)
    DIR/cells/<id>.json     one record per cell (``cells.CellResult`` as JSON), written as the cell finishes
    DIR/index.parquet       one row per cell of the last run (``INDEX_SCHEMA``), for pandas, DuckDB, a spreadsheet

Why records and an index: a record holds all a cell found (every node left to the CPU with the
HTP's reason), is written the moment its cell ends (a sweep killed an hour in keeps that hour),
and is what a resumed sweep trusts; the index is the flat table people open. Both are streamed:
the runner holds the cells running and at most ``ROW_GROUP`` index rows, so memory stays flat
however many cells the sweep has. A record is read back through ``serde`` (every field checked):
a corrupt or foreign file is a note and a ``failed`` row (or, without an index row to name it, is
skipped with a note), never a crash, and a resumed sweep reruns that cell.

Resume: a cell whose record exists with the same ``Cell.key`` (same model content, settings and
project version) is not rerun, whether it was ``ok`` or ``failed``; ``force`` reruns every cell
(and bypasses the partition cache). The index lists exactly the cells of the last run's spec;
records of cells no longer in the spec stay in ``cells/`` and are not listed.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from dashboard import __version__
from dashboard.errors import UserError
from dashboard.serde import SchemaError, loads
from dashboard.sweep.cells import Cell, CellProgress, CellResult, Executor, RunOne, run_cell

if TYPE_CHECKING:
    import pandas

    from dashboard.runtime.jobs import Cancellation
    from dashboard.sweep.spec import Spec

MANIFEST, CELLS, INDEX, LOCK = "sweep.json", "cells", "index.parquet", ".lock"
MANIFEST_SCHEMA = "sweep/1"
ROW_GROUP = 256  # index rows kept before they are written (one Parquet row group)
MAX_RECORD_BYTES = 64 << 20  # a record is small; a bigger file is not one of ours

# The index's columns: (name, Arrow type name, what it holds). docs/sweeps.md's table is this one.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("model", "string", "the model's path relative to the spec's folder (absolute when outside it)"),
    ("soc", "string", "the SoC key the cell compiled for"),
    ("option_set", "string", "the setting set's name"),
    ("analysis", "string", "classify, partition, profile, accuracy or quantize"),
    ("status", "string", "ok or failed"),
    ("reason", "string", "why it failed (the runtime's own words), else empty"),
    ("htp_coverage", "float64", "partition: share of the model's nodes the HTP claims (0-1)"),
    ("htp_claimed", "int64", "partition: nodes the HTP claims"),
    ("htp_nodes", "int64", "partition: nodes offered to the HTP (claimed + refused; removed by ONNX Runtime: neither)"),
    ("cpu_nodes", "int64", "partition: nodes left to the CPU"),
    ("cpu_ops", "string", "partition: their op types with counts, e.g. 'NonZero×1, Range×2'"),
    ("verdict_ep", "string", "classify: the EP rules' verdict (backend_type=auto)"),
    ("verdict_refined", "string", "classify: the refined classifier's verdict"),
    ("route_ep", "string", "classify: the backend the EP rules route to"),
    ("route_refined", "string", "classify: the backend the refined classifier routes to"),
    ("profile_runs", "int64", "profile: the timed runs each figure is the median of"),
    ("htp_total", "float64", "profile: the HTP's total, median over the runs, in htp_unit (never a time for cycles)"),
    ("htp_unit", "string", "profile: cycles"),
    ("htp_hardware", "string", "profile: what measured the HTP's figures, e.g. 'HTP simulator (x86_64)' or a SoC"),
    ("htp_label", "string", "profile: what the HTP's figure is, e.g. 'simulated HTP cycles'"),
    ("cpu_total", "float64", "profile: the CPU EP's total for the nodes the HTP refused, in cpu_unit"),
    ("cpu_unit", "string", "profile: us"),
    ("cpu_hardware", "string", "profile: what ran the CPU EP, e.g. 'x86_64 CPU'"),
    ("gpu_total", "float64", "profile: the GPU's total, in gpu_unit (where the GPU runs: a device)"),
    ("gpu_unit", "string", "profile: us"),
    ("gpu_hardware", "string", "profile: what measured the GPU's figures"),
    ("top_node", "string", "profile: the HTP's costliest node (or an inserted row, e.g. the input Transpose)"),
    ("top_node_share", "float64", "profile: its share of the HTP's total (0-1)"),
    ("top_nodes", "string", "profile: each backend's costliest nodes, e.g. 'htp Transpose 62.3%; htp Relu 21.4%'"),
    ("data", "string", "accuracy, quantize: what the figures were computed on ('random inputs', N sample(s) of a file)"),
    ("acc_comparison", "string", "accuracy, quantize: the comparison acc_sqnr_db is of, e.g. 'htp_vs_float'"),
    ("acc_sqnr_db", "float64", "accuracy, quantize: its worst output's SQNR in dB (higher is better)"),
    ("acc_cosine", "float64", "accuracy, quantize: its lowest output cosine"),
    ("acc_top1", "float64", "accuracy, quantize: its lowest top-1 agreement, class scores only (0-1)"),
    ("first_jump", "string", "accuracy with layers: the node where the error first jumps"),
    ("q_lifted", "int64", "quantize: tensors the search lifted to 16 bits"),
    ("q_reached", "string", "quantize: whether the target held (yes, no; empty without a target)"),
    ("q_cycles_ratio", "float64", "quantize: the QDQ model's simulated HTP cycles over the float model's in fp16"),
    ("q_htp_refused", "int64", "quantize: nodes the HTP refuses on the integer path (the QDQ ends not counted)"),
    ("hardware", "string", "what measured it: simulator (the HTP simulator on x86_64), npu, ..."),
    ("elapsed_s", "float64", "the cell's wall time, seconds"),
    ("host", "string", "the machine that ran it"),
    ("node", "string", "the executor's worker there (a Ray node, a device), else empty"),
    ("executor", "string", "local, ray or devices"),
    ("finished", "string", "when it finished, UTC ISO 8601"),
    ("digest", "string", "the model file's content digest"),
    ("version", "string", "the project version that ran it"),
    ("key", "string", "the cell's key: a record is reused while it matches"),
    ("record", "string", "the cell's JSON record, relative to the folder"),
)


_CELL = ("model", "soc", "option_set", "analysis", "digest", "version", "host", "finished")  # to name a lost record


def index_row(result: CellResult, record: str) -> dict[str, Any]:
    """``result`` as one flat row of the index."""
    cell = result.cell
    ops = Counter(node.op_type for node in result.cpu_nodes)
    partition = cell.analysis == "partition" and result.ok
    costs = {c.backend: c for c in result.costs if c.status == "ok"}
    top = next((n for n in result.top_nodes if n.backend == "htp"), None)
    profile = {f"{b}_{k}": getattr(costs[b], k) if b in costs else None
               for b in ("htp", "cpu", "gpu") for k in ("total", "unit", "hardware")}
    return {
        "model": cell.model, "soc": cell.soc, "option_set": cell.option_set, "analysis": cell.analysis,
        "status": result.status, "reason": result.reason or "",
        "htp_coverage": result.htp_coverage, "htp_claimed": result.htp_claimed, "htp_nodes": result.htp_nodes,
        "cpu_nodes": len(result.cpu_nodes) if partition else None,
        "cpu_ops": ", ".join(f"{op}×{n}" for op, n in sorted(ops.items())),
        "verdict_ep": result.verdicts.get("ep"), "verdict_refined": result.verdicts.get("refined"),
        "route_ep": result.routes.get("ep"), "route_refined": result.routes.get("refined"),
        "profile_runs": cell.runs if cell.analysis == "profile" else None, **profile,
        "htp_label": costs["htp"].label if "htp" in costs else None,
        "top_node": top.name if top else None, "top_node_share": top.share if top else None,
        "top_nodes": "; ".join(f"{n.backend} {n.name} {n.share:.1%}" for n in result.top_nodes),
        **_accuracy_columns(result),
        "hardware": result.hardware, "elapsed_s": result.elapsed_s, "host": result.host, "node": result.node,
        "executor": result.executor, "finished": result.finished, "digest": cell.digest, "version": cell.version,
        "key": cell.key, "record": record,
    }


def _accuracy_columns(result: CellResult) -> dict[str, Any]:
    """An accuracy or quantize cell's index figures: the comparison a reader looks at first (the
    HTP against float: fp16 for accuracy, the QDQ model for quantize), else the first that ran."""
    main = "qdq_htp_vs_float" if result.cell.analysis == "quantize" else "htp_vs_float"
    ok = [f for f in result.accuracy if f.status == "ok"]
    figure = next((f for f in ok if f.comparison == main), ok[0] if ok else None)
    q = result.quantized
    return {"data": result.data, "acc_comparison": figure.comparison if figure else None,
            "acc_sqnr_db": figure.sqnr_db if figure else None, "acc_cosine": figure.cosine if figure else None,
            "acc_top1": figure.top1 if figure else None, "first_jump": result.first_jump,
            "q_lifted": len(q.lifted) if q else None,
            "q_reached": None if q is None or q.reached is None else "yes" if q.reached else "no",
            "q_cycles_ratio": q.cycles_ratio if q else None, "q_htp_refused": q.htp_refused if q else None}


def index_schema():
    import pyarrow as pa

    types = {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64()}
    return pa.schema([(name, types[kind]) for name, kind, _ in COLUMNS])


# -- the folder ----------------------------------------------------------------------------------------
class Store:
    """A results folder. ``notes`` collects what reading it found wrong (corrupt records).

    ``create``: the folder and ``cells/`` are made 0700 where missing, and every file written is
    0600 (records, the manifest, the index, the lock): the records name every model and what was
    measured on it, for this user only (share a folder by copying it). ``inside``: the folder
    must lie in that one (``check_inside``), as a page's run into a sweep root requires."""

    def __init__(self, root: str | os.PathLike, create: bool = False, inside: str | os.PathLike | None = None) -> None:
        self.root = Path(root).expanduser()
        self.notes: list[str] = []
        if inside is not None:
            check_inside(self.root, Path(inside))
        if create:
            from dashboard import platform

            try:
                platform.private_folder(self.root / CELLS)
            except OSError as exc:
                raise UserError(f"{root}: cannot create the results folder ({exc.strerror or exc})") from None
            if inside is not None:
                check_inside(self.root, Path(inside))  # again: made now, nothing swapped in meanwhile
        elif not self.root.is_dir():
            raise UserError(f"{root}: no such results folder")
        elif not (self.root / INDEX).is_file() and not (self.root / CELLS).is_dir():
            raise UserError(f"{root}: not a sweep's results folder (no {INDEX} and no {CELLS}/)")

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the folder for one run: a second sweep into the same folder at the same time would
        interleave two indexes into one file. One ``UserError`` line when another run holds it."""
        from dashboard import platform

        path = self.root / LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError as exc:
            raise UserError(f"{path}: cannot open the folder's lock ({exc.strerror or exc})") from None
        try:
            if not platform.try_lock_exclusive(fd):
                raise UserError(f"{self.root}: another sweep is writing into this folder; wait for it to end or "
                                "give another --out")
            yield
        finally:
            os.close(fd)

    def record_name(self, cell: Cell) -> str:
        return f"{CELLS}/{cell.cell_id}.json"

    # -- records
    def write(self, result: CellResult) -> str:
        """Write ``result``'s record whole (a temporary file renamed over it: a sweep killed while
        writing leaves the old record or the new one, never half of one). Returns its name."""
        name = self.record_name(result.cell)
        _write_atomic(self.root / name, json.dumps(result.to_json(), indent=1))
        return name

    def read(self, name: str) -> CellResult | None:
        """The record ``name`` (relative to the folder), checked; None with a note when it is
        missing, unreadable or not a cell record."""
        path = self.root / name
        try:
            if path.is_symlink() or not path.is_file():
                raise OSError("missing or not a regular file")
            if path.stat().st_size > MAX_RECORD_BYTES:
                raise OSError(f"larger than {MAX_RECORD_BYTES >> 20} MB")
            return loads(CellResult, path.read_bytes(), name)
        except OSError as exc:
            self.notes.append(f"{name}: cannot read the record ({getattr(exc, 'strerror', None) or exc})")
        except SchemaError as exc:
            self.notes.append(f"not a cell record: {exc}")
        return None

    def existing(self, cell: Cell) -> CellResult | None:
        """The record of ``cell`` when it can be reused: readable and of the same key."""
        path = self.root / self.record_name(cell)
        if not path.exists():
            return None
        old = self.read(self.record_name(cell))
        return old if old is not None and old.cell.key == cell.key else None

    # -- reading the whole folder
    def identity(self) -> tuple[str, int, int]:
        """What changes whenever ``index`` would read something else: the index file's name, mtime
        (ns) and size, or, without an index, the ``cells/`` folder's. A page keys its caches on it,
        so a rerun of the page reads nothing and a new run of the sweep is seen at once."""
        for path in (self.root / INDEX, self.root / CELLS):
            with contextlib.suppress(OSError):
                stat = path.stat()
                return str(path), stat.st_mtime_ns, stat.st_size
        return str(self.root), 0, 0

    def index(self) -> "pandas.DataFrame":
        """The index table (columns ``COLUMNS``); built from the records when there is none (a
        sweep killed before its first rows were written)."""
        import pandas as pd

        path = self.root / INDEX
        if path.is_file():
            try:
                frame = pd.read_parquet(path)
                for name, _, _ in COLUMNS:  # an index of an older version: its missing columns empty
                    if name not in frame.columns:
                        frame[name] = None
                return frame
            except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
                self.notes.append(f"{INDEX}: unreadable ({type(exc).__name__}: {exc}); read the records instead")
        rows = [index_row(r, self.record_name(r.cell)) for r in self._scan()]
        return pd.DataFrame(rows, columns=[c for c, _, _ in COLUMNS])

    def results(self) -> Iterator[CellResult]:
        """Every cell of the last run, one at a time, from the index's rows and their records; a
        row whose record is corrupt is a ``failed`` result saying so."""
        path = self.root / INDEX
        if not path.is_file():
            yield from self._scan()
            return
        import pyarrow.parquet as pq

        try:
            batches = pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP, columns=["record", "key", *_CELL])
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
            self.notes.append(f"{INDEX}: unreadable ({type(exc).__name__}: {exc}); read the records instead")
            yield from self._scan()
            return
        try:
            for batch in batches:
                for row in batch.to_pylist():
                    yield self._row_result(row)
        except (OSError, ValueError) as exc:  # a row group damaged past the file's footer (ArrowInvalid)
            raise UserError(f"{path}: the index is damaged ({exc}); rerun the sweep to rebuild it") from None

    def _row_result(self, row: dict) -> CellResult:
        name = row.get("record") or ""
        result = self.read(name) if name.startswith(f"{CELLS}/") and ".." not in name else None
        if result is not None:
            if result.cell.key != row.get("key"):  # a run killed outright (SIGKILL) wrote it after the index
                self.notes.append(f"{name} is newer than {INDEX} (a run that ended without writing its index); "
                                  "rerun the sweep to refresh the index")
            return result
        from dashboard.runtime.knobs import Settings

        cell = Cell(model=row["model"], path="", digest=row.get("digest") or "", soc=row["soc"],
                    option_set=row["option_set"], analysis=row["analysis"], settings=Settings(soc=row["soc"]),
                    version=row.get("version") or "")
        return CellResult.failure(cell, f"its record {name} is missing or corrupt: rerun the sweep to measure it again",
                                  host=row.get("host") or "", finished=row.get("finished") or "")

    def _scan(self) -> Iterator[CellResult]:
        folder = self.root / CELLS
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            result = self.read(f"{CELLS}/{path.name}")
            if result is not None:
                yield result

    def manifest(self) -> dict:
        path = self.root / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def write_manifest(self, data: dict) -> None:
        _write_atomic(self.root / MANIFEST, json.dumps({"schema": MANIFEST_SCHEMA, **data}, indent=1))


def check_inside(root: Path, base: Path) -> None:
    """Refuse a results folder that is not a real folder of this user's inside ``base``: a
    symlink (at the folder or its ``cells/``), a folder another user owns, or one whose real path
    leaves ``base``. Why: a page writes into ``<spec>.results`` under an operator's sweep root, a
    folder other people may write in; a symlink planted there would have the sweep write its
    records wherever it points, and a folder someone else made is theirs to swap files in."""
    from dashboard import platform

    for path in (root, root / CELLS):
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UserError(f"{root}: cannot look at the results folder ({exc.strerror or exc})") from None
        import stat

        why = "is a symlink" if stat.S_ISLNK(info.st_mode) else None
        why = why or (None if stat.S_ISDIR(info.st_mode) else "is not a folder") or platform.foreign_owner(info)
        if why:
            raise UserError(f"{path}: refusing to write the sweep's results there, it {why}")
    real, inside = Path(os.path.realpath(root)), Path(os.path.realpath(base))
    if real != inside and inside not in real.parents:
        raise UserError(f"{root}: refusing to write the sweep's results there, it leads out of {base}")


def _write_atomic(path: Path, text: str) -> None:
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UserError(f"{path}: cannot write it ({exc.strerror or exc})") from None


class IndexWriter:
    """The index, streamed: rows are kept until ``ROW_GROUP`` of them, then written as one row
    group of ``index.parquet.partial``, which ``close`` renames over the index (so the index of
    the previous run stays whole until this one has one; an interrupted run's index has the cells
    that finished). Thread-safe: an executor may report from any thread."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = store.root / f"{INDEX}.partial"
        self.rows: list[dict] = []
        self.writer = None
        self.handle = None
        self.lock = threading.Lock()

    def add(self, result: CellResult, record: str) -> None:
        with self.lock:
            self.rows.append(index_row(result, record))
            if len(self.rows) >= ROW_GROUP:
                self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = index_schema()
        if self.writer is None:
            from dashboard import platform

            self.path.unlink(missing_ok=True)  # a leftover, or a symlink planted there: never written through
            self.handle = os.fdopen(platform.create_private(self.path), "wb")  # 0600; closed in close()
            self.writer = pq.ParquetWriter(self.handle, schema)
        self.writer.write_table(pa.Table.from_pylist(self.rows, schema=schema))
        self.rows = []

    def close(self) -> None:
        with self.lock:
            try:
                if self.rows or self.writer is None:
                    self._flush()
                self.writer.close()
                self.handle.close()
                os.replace(self.path, self.store.root / INDEX)
            except OSError as exc:
                raise UserError(f"{self.store.root / INDEX}: cannot write the index ({exc.strerror or exc})") from None


# -- the runner ----------------------------------------------------------------------------------------
@dataclass
class Progress:
    """Where a sweep is: cells done of ``total`` (``reused`` from the folder, ``ran`` now, of them
    ``failed``), the time since it started and an estimate of the time left (from the cells run so
    far; None before the first)."""

    total: int
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    reused: int = 0
    ran: int = 0
    failed: int = 0
    first_run: float | None = None  # when the first cell to run was handed out
    last: CellResult | None = None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def eta(self) -> float | None:
        """Seconds left: the time per cell run so far times the cells left. Reused cells cost
        nothing, so the rate counts only the cells that ran."""
        if not self.ran or self.first_run is None:
            return None
        return (time.monotonic() - self.first_run) / self.ran * max(self.total - self.done, 0)

    def count(self, result: CellResult, reused: bool) -> None:
        self.done += 1
        self.reused += reused
        self.ran += not reused
        self.failed += not result.ok
        self.last = result


def run_sweep(spec: Spec, store: Store, *, executor: Executor | None = None, run_one: RunOne | None = None,
              jobs: int | None = None, force: bool = False, on_progress: Callable[[Progress], None] | None = None,
              cell_progress: CellProgress | None = None, cancel: Cancellation | None = None) -> Progress:
    """Run ``spec``'s cells into ``store``: cells with a reusable record are not run (unless
    ``force``), the others go to ``executor`` (``executors.run_local`` by default, ``jobs`` at a
    time) through ``run_one`` (``run_cell``); each result is recorded and indexed as it arrives,
    and ``on_progress`` hears of every cell. Interrupted or cancelled, the records and the index
    of the cells that finished are kept (the next run resumes there) and the exception goes on."""
    with store.writing():
        return _run(spec, store, executor, run_one, jobs, force, on_progress, cell_progress, cancel)


def _run(spec, store, executor, run_one, jobs, force, on_progress, cell_progress, cancel) -> Progress:
    from dashboard.runtime.jobs import Cancellation
    from dashboard.sweep.executors import run_local

    executor = executor or run_local
    run_one = run_one or partial(run_cell, use_cache=not force)
    cancel = cancel or Cancellation()
    progress = Progress(spec.cell_count)
    index = IndexWriter(store)
    started = _now()
    manifest = {"spec": str(spec.path), "version": __version__, "started": started, "cells": spec.cell_count,
                "models": len(spec.models), "socs": spec.socs, "option_sets": list(spec.option_sets),
                "analyses": spec.analyses, "complete": False}
    store.write_manifest(manifest)
    lock = threading.Lock()

    def record(result: CellResult, name: str, reused: bool) -> None:
        index.add(result, name)
        with lock:
            progress.count(result, reused)
        if on_progress:
            on_progress(progress)

    def to_run() -> Iterator[Cell]:
        for cell in spec.cells():
            old = None if force else store.existing(cell)
            if old is not None:
                record(old, store.record_name(cell), True)
                continue
            if progress.first_run is None:
                progress.first_run = time.monotonic()
            yield cell

    try:
        for result in executor(to_run(), run_one, jobs=jobs or 0, progress=cell_progress, cancel=cancel):
            record(result, store.write(result), False)
    finally:
        index.close()
        store.write_manifest({**manifest, "finished": _now(), "complete": progress.done == progress.total,
                              "ran": progress.ran, "reused": progress.reused, "failed": progress.failed,
                              "notes": store.notes[:50]})
    return progress


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
