"""``--devices URL,...``: a sweep's cells spread over attached devices, how a lab of boards is swept.

Each device is a ``runtime.devices.Device`` (``local``, ``local?python=...``, ``ssh://...``, checked
as the terminal's: the command line is the person at it) and is probed first (in parallel): its
SoC is what its probe reports (the kernel's ``/sys/devices/soc0/machine``, ``socs.identify_soc``).
A device takes the cells of its own SoC; a device whose probe names no part this project knows
(this machine's HTP simulator, which compiles for whatever SoC a cell asks; a board of an unknown
part, like the emulated arm64 board) takes the cells of the SoCs no attached device is. A cell
whose SoC no device takes is a ``failed`` row naming the devices there are; the sweep goes on.

The devices run in parallel, one cell at a time each (a board has one NPU; two sessions on it
would measure each other), every cell through ``run_cell(..., device=...)``: the partition's
QNN work in that device's runtime worker, so a crash there is that cell's failed row. A device
that cannot be reached at the start is one ``UserError`` line before anything runs.
"""

from __future__ import annotations

import inspect
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Iterator

from dashboard.errors import UserError
from dashboard.sweep.cells import Cell, CellProgress, CellResult, RunOne

if TYPE_CHECKING:
    from dashboard.runtime.devices import Device, DeviceProbe
    from dashboard.runtime.jobs import Cancellation

EXECUTOR = "devices"
ANY_SOC = None  # the pool of devices that name no known part
PROBE_TIMEOUT_S = 600.0
WAIT_S = 0.5


@dataclass
class Attached:
    """A device, what its probe found, and the SoC key it takes cells of (None: unidentified)."""

    device: Device
    probe: DeviceProbe
    soc: str | None
    cells: int = 0

    @property
    def label(self) -> str:
        return self.device.label


def devices_executor(urls: list[str]) -> "DevicesExecutor":
    """The devices of ``urls``, parsed and probed; one ``UserError`` line for a bad or unreachable
    one, or the same device twice."""
    from dashboard.runtime.devices import Device

    if not urls:
        raise UserError("--devices needs at least one device address (local, ssh://user@host, ...)")
    try:
        devices = [Device.parse(url) for url in urls]
    except UserError as exc:
        raise UserError(f"--devices: {exc}") from None
    seen: dict[str, str] = {}
    for url, device in zip(urls, devices):
        if device.url in seen:
            raise UserError(f"--devices names {device.label} twice ({seen[device.url]!r} and {url!r})")
        seen[device.url] = url
    try:
        with ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="sweep-probe") as pool:
            probes = list(pool.map(lambda d: d.probe(timeout=PROBE_TIMEOUT_S), devices))
    except UserError as exc:  # an unreachable device, a worker of another version: before any cell runs
        raise UserError(f"--devices: {exc}") from None
    executor = DevicesExecutor([Attached(d, p, device_soc(p)) for d, p in zip(devices, probes)])
    for line in executor.describe():
        print(f"devices: {line}", file=sys.stderr, flush=True)
    return executor


def device_soc(probe: DeviceProbe) -> str | None:
    """The SoC key a probe reports, or None when it names no part this project knows."""
    from dashboard.runtime.socs import identify_soc

    soc = identify_soc(machine=(probe.soc or {}).get("machine"))
    return None if soc is None else soc.key


@dataclass
class _Group:
    """The devices that take one SoC's cells (or the unidentified ones), and the cells waiting."""

    devices: list[Attached]
    waiting: queue.Queue = field(default_factory=queue.Queue)


class DevicesExecutor:
    """A ``cells.Executor`` over attached devices (see the module docstring)."""

    def __init__(self, attached: list[Attached]) -> None:
        self.attached = attached
        self.groups: dict[str | None, _Group] = {}
        for item in attached:
            self.groups.setdefault(item.soc, _Group([])).devices.append(item)

    def describe(self) -> list[str]:
        """One line per device: which SoC's cells it takes."""
        return [f"{a.label}: {a.probe.os} {a.probe.arch}, takes the cells of "
                f"{a.soc if a.soc else 'the SoCs no other device is (its probe names no known SoC)'}"
                for a in self.attached]

    def group_of(self, cell: Cell) -> _Group | None:
        return self.groups.get(cell.soc) or self.groups.get(ANY_SOC)

    def __call__(self, cells: Iterable[Cell], run_one: RunOne, *, jobs: int = 0,
                 progress: CellProgress | None = None, cancel: Cancellation | None = None) -> Iterator[CellResult]:
        from dashboard.runtime.jobs import Cancellation

        cancel = cancel or Cancellation()
        results: queue.Queue = queue.Queue()
        runners = [threading.Thread(target=self._serve, args=(item, group, run_one, progress, cancel, results),
                                    name=f"sweep-device {item.label}", daemon=True)
                   for group in self.groups.values() for item in group.devices]
        for runner in runners:
            runner.start()
        # Cells in flight (waiting or running): twice the devices, so each has its next cell ready
        # while memory holds a handful of cells however long the sweep.
        limit, in_flight, source = 2 * len(self.attached), 0, iter(cells)
        try:
            while True:
                while in_flight < limit and not cancel.cancelled:
                    cell = next(source, None)
                    if cell is None:
                        break
                    group = self.group_of(cell)
                    if group is None:
                        yield self._unserved(cell)
                        continue
                    group.waiting.put(cell)
                    in_flight += 1
                if not in_flight:
                    break
                try:
                    result = results.get(timeout=WAIT_S)
                except queue.Empty:
                    continue
                in_flight -= 1
                if result is not None:
                    yield result
            cancel.check()
        except BaseException:
            cancel.stop()
            raise
        finally:
            for group in self.groups.values():
                for _ in group.devices:
                    group.waiting.put(None)
            for runner in runners:
                runner.join()

    def _unserved(self, cell: Cell) -> CellResult:
        attached = "; ".join(f"{a.label} ({a.soc or 'no known SoC'})" for a in self.attached)
        return CellResult.failure(cell, f"no attached device takes {cell.soc} cells (attached: {attached})",
                                  executor=EXECUTOR)

    def _serve(self, item: Attached, group: _Group, run_one: RunOne, progress: CellProgress | None,
               cancel: Cancellation, results: queue.Queue) -> None:
        """One device's loop: its group's next cell, run there, until the sentinel."""
        takes_device = _accepts_device(run_one)
        while True:
            cell = group.waiting.get()
            if cell is None:
                return
            if cancel.cancelled:
                results.put(None)
                continue
            results.put(self._run(item, cell, run_one, takes_device, cancel))

    def _run(self, item: Attached, cell: Cell, run_one: RunOne, takes_device: bool,
             cancel: Cancellation) -> CellResult | None:
        from dashboard.runtime.jobs import Cancelled

        try:
            result = run_one(cell, cancel, device=item.device) if takes_device else run_one(cell, cancel)
        except Cancelled:
            return None
        except Exception as exc:  # noqa: BLE001 - one cell's bug is one failed row
            if cancel.cancelled:
                return None
            result = CellResult.failure(cell, f"internal error ({type(exc).__name__}: {exc})")
        item.cells += 1
        result.executor, result.node = EXECUTOR, item.label
        result.host = item.probe.hostname or result.host
        return result


def _accepts_device(run_one: RunOne) -> bool:
    """Whether ``run_one`` takes ``device=`` (``run_cell`` and partials of it do; a test's fake
    runner may not, and then runs the cell as it is)."""
    try:
        parameters = inspect.signature(run_one).parameters
    except (TypeError, ValueError):
        return False
    return "device" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
