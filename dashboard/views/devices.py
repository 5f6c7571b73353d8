"""Devices page: where the runtime worker runs (this machine, or a Snapdragon device over SSH),
and what each device can do: OS/arch, runtime versions, which QNN backends initialize, the
shared-memory allocator, and what it says about its SoC.

The list lives in the session; the device picked here (or added last) is the current device,
the one the Partitions and Timeline pages start on (``current_device``); picking another one on
those pages makes it current everywhere. This machine is probed when the page opens (once per
server per ``LOCAL_PROBE_TTL_S``; Probe measures again). Probing starts the device's worker, so a
device that cannot be reached is one error line, and a native crash while probing never takes the
dashboard down.

What the page accepts is narrower than the command line (``Device.parse(..., source=BROWSER)``):
a page may be someone else's (``dashboard.access``), so another interpreter on this machine only
by a name the operator listed (``local?python=NAME``, picked here from the list), and a
known_hosts file only one the operator allows.
"""

from __future__ import annotations

import os

import pandas as pd
import streamlit as st

from dashboard import access
from dashboard.access import BROWSER
from dashboard.errors import UserError
from dashboard.runtime.devices import HOST_KEY_POLICIES, MAX_CONNECT_TIMEOUT, SHELLS, Device, DeviceProbe
from dashboard.runtime.protocol import DoctorReport
from dashboard.runtime.socs import SIMULATOR_NOTE, hardware_label
from dashboard.views.safe import frame, md, short

_DEVICES = "devices"  # url -> Device
_PROBES = "device_probes"  # url -> DeviceProbe, or the one line saying why the device could not be probed
_CURRENT = "device_current"
_DOCTOR = "device_doctor"  # url -> DoctorReport, or the one line saying why it could not run
PROBE_TIMEOUT = 180.0
LOCAL_PROBE_TTL_S = 3600
NO_GPU_NOTE = ("No QNN GPU on this host: the timeline's fast backend here is ONNX Runtime's CPU EP, labelled "
               "**CPU EP (no QNN GPU on this host)**; GPU figures need a Snapdragon device.")


def devices() -> dict[str, Device]:
    """The session's devices, this machine first."""
    known: dict[str, Device] = st.session_state.setdefault(_DEVICES, {})
    if "local" not in known:
        known["local"] = Device.parse("local")
    return known


def current_device() -> Device:
    """The device the pages run on: the one picked last anywhere, this machine by default."""
    known = devices()
    return known.get(st.session_state.get(_CURRENT, "local"), known["local"])


def select_device(label: str = "Device", key: str = "device_pick", in_form: bool = False) -> Device:
    """A picker over the session's devices that shows the current device and makes the one picked
    current everywhere. The widget is set to the current device before it is drawn, so a device
    added or picked on another page is what every picker shows. Inside a form a widget cannot
    have a callback: the form's submit button must call ``adopt(key)``."""
    known = devices()
    st.session_state[key] = current_device().url
    picked = st.selectbox(label, list(known), format_func=lambda url: known[url].label, key=key,
                          on_change=None if in_form else adopt, args=None if in_form else (key,))
    return known[picked]


def adopt(key: str) -> None:
    """Make the device picked in the widget ``key`` the current one (a widget callback)."""
    if st.session_state.get(key) in devices():
        st.session_state[_CURRENT] = st.session_state[key]


def render() -> None:
    st.title("Devices", anchor=False)
    st.caption("Where QNN work runs: this machine, or a Snapdragon board / Windows-on-Snapdragon laptop over "
               "SSH (your keys and ~/.ssh/config, no open ports; the device needs this package installed). "
               "Models are sent over the same connection.")
    config = _operator()
    _add_form(config)
    _add_local_python(config)
    known = devices()
    probes: dict = st.session_state.setdefault(_PROBES, {})
    select_device("Device used by the Partitions and Timeline pages")
    if "local" not in probes:
        with st.spinner("Probing this machine: starting its worker, one tiny session per backend…"):
            probes["local"] = _probe_local()
    for url, device in list(known.items()):
        with st.container(border=True):
            head, probe_col, remove_col = st.columns([6, 1, 1], vertical_alignment="center")
            head.markdown(f"**{md(device.label)}**")
            if probe_col.button("Probe", key=f"probe_{url}", icon=":material/radar:"):
                with st.spinner(f"Probing {device.label}: starting its worker, one tiny session per backend…"):
                    if url == "local":
                        _probe_local.clear()
                    probes[url] = _probe_local() if url == "local" else _probe(device)
            if url != "local" and remove_col.button("Remove", key=f"remove_{url}", icon=":material/delete:"):
                known.pop(url)
                probes.pop(url, None)
                if st.session_state.get(_CURRENT) == url:
                    st.session_state[_CURRENT] = "local"
                st.rerun()
            if url in probes:
                _show_probe(probes[url])
            _doctor(url, device)


def _probe(device: Device) -> DeviceProbe | str:
    try:
        return device.probe(timeout=PROBE_TIMEOUT)
    except UserError as exc:
        return str(exc)


@st.cache_data(ttl=LOCAL_PROBE_TTL_S, show_spinner=False)
def _probe_local() -> DeviceProbe | str:
    """This machine's probe, shared by every session: it costs a worker and three tiny sessions,
    and what this host can run does not change while the server runs."""
    return _probe(Device.parse("local"))


def _add_form(config: access.OperatorConfig) -> None:
    with st.expander("Add a device over SSH", icon=":material/add_link:"):
        with st.form("add_device", clear_on_submit=False, border=False):
            url = st.text_input("Device", placeholder="ssh://user@board[:port]  (or a Host alias: ssh://myboard)")
            left, right = st.columns(2)
            python = left.text_input("Remote Python", placeholder="python3",
                                     help="The interpreter on the device that has this package installed, e.g. "
                                          "/opt/qnn-lab/.venv/bin/python")
            workdir = right.text_input("Remote working directory", placeholder="/opt/qnn-lab",
                                       help="Checkout of this project on the device (python -m finds it there)")
            identity = left.text_input("Private key file (optional)", placeholder="~/.ssh/id_ed25519",
                                       help="On the machine running the dashboard; default: your agent and config")
            shell = right.selectbox("Remote shell", list(SHELLS),
                                    help="windows for Windows-on-Snapdragon (OpenSSH's default shell is cmd.exe); "
                                         "powershell if the device's OpenSSH runs PowerShell instead")
            timeout = left.number_input("Connect timeout (s)", min_value=1, max_value=MAX_CONNECT_TIMEOUT, value=10)
            host_key = right.selectbox("Host key check", [None, *HOST_KEY_POLICIES],
                                       format_func=lambda v: "as in ~/.ssh/config" if v is None else v,
                                       help="yes: the host must already be in known_hosts; accept-new: "
                                            "remember a new host's key, refuse a changed one")
            jump = left.text_input("Jump host (optional)", placeholder="user@gateway[:port]",
                                   help="Reach the device through this host (ssh -J)")
            allowed = list(config.known_hosts)
            known_hosts = right.selectbox("known_hosts file", [None, *allowed],
                                          format_func=lambda v: "as in ~/.ssh/config" if v is None else v,
                                          help="Only files the operator allows: " + _KNOWN_HOSTS_HOW)
            if st.form_submit_button("Add device", icon=":material/add:"):
                try:
                    device = Device.parse(url.strip(), source=BROWSER, python=python.strip() or None,
                                          workdir=workdir.strip() or None, identity=identity.strip() or None,
                                          shell=shell, connect_timeout=int(timeout), host_key=host_key,
                                          known_hosts=known_hosts, jump=jump.strip() or None)
                    if device.is_local and device.python is None:
                        raise UserError("this machine is already listed; give ssh://user@host or "
                                        "local?python=NAME (an interpreter the operator listed)")
                except UserError as exc:
                    st.error(md(exc), icon=":material/error:")
                    return
                _added(device)


_PYTHONS_HOW = (f"the operator lists one as NAME=PATH in the environment variable {access.PYTHONS_ENV} "
                f"(items separated by '{os.pathsep}') or under [devices] pythons in the config file")
_KNOWN_HOSTS_HOW = (f"the operator allows one in {access.KNOWN_HOSTS_ENV} or under [devices] known_hosts in the "
                    "config file")


def _operator() -> access.OperatorConfig:
    """The operator's record; a bad config file is the operator's to fix, shown once on the page."""
    try:
        return access.operator()
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        return access.OperatorConfig()


def _added(device: Device) -> None:
    devices()[device.url] = device
    st.session_state[_CURRENT] = device.url
    st.success(f"Added {md(device.label)}; probe it to see what it can run.")


def _add_local_python(config: access.OperatorConfig) -> None:
    """Another interpreter on this machine, picked by name from the operator's list: a page never
    takes an interpreter's path (it would run whatever file it names as the dashboard's user)."""
    pythons = config.pythons
    with st.expander("Add another interpreter on this machine", icon=":material/terminal:"):
        st.caption(f"Only interpreters the operator listed, by name: {md(_PYTHONS_HOW)} "
                   f"({md(str(access.config_path()))}), then restarts the dashboard. The command line takes "
                   "any path (`--device local?python=PATH`).")
        if not pythons:
            st.info("No interpreter is listed.", icon=":material/info:")
            return
        name = st.selectbox("Interpreter", list(pythons), key="device_python_name",
                            format_func=lambda n: f"{n} — {pythons[n]}")
        if st.button("Add interpreter", key="device_python_add", icon=":material/add:"):
            try:
                device = Device.parse(f"local?python={name}", source=BROWSER)
            except UserError as exc:
                st.error(md(exc), icon=":material/error:")
                return
            _added(device)


def _show_probe(result: DeviceProbe | str) -> None:
    if isinstance(result, str):
        st.error(md(result), icon=":material/wifi_off:")
        return
    facts = [("Host", result.hostname), ("OS", result.os), ("Arch", result.arch), ("Python", result.python),
             ("onnxruntime", result.onnxruntime), ("onnxruntime-qnn", result.onnxruntime_qnn),
             ("QNN SDK", result.qnn_sdk)]
    st.markdown(" · ".join(f"{label} **{md(value or '—', 60)}**" for label, value in facts))
    rows = [{"backend": name, "initializes": "yes" if b.ok else "no", "seconds": b.seconds,
             "runtime's message": short(b.error or "", 300)} for name, b in result.backends.items()]
    shared = result.shared_memory
    rows.append({"backend": "HTP shared memory (rpcmem)", "initializes": "yes" if shared and shared.ok else "no",
                 "seconds": None, "runtime's message": short(shared.reason or "" if shared else "not probed", 300)})
    st.dataframe(frame(rows), hide_index=True, width="stretch")
    if result.initializes("gpu") is False:
        st.info(NO_GPU_NOTE, icon=":material/info:")
    soc = result.soc
    if soc:
        described = {k: v for k, v in soc.items() if k != "ep_devices"}
        st.markdown("**SoC** " + (" · ".join(f"{md(k)}: `{md(v, 80)}`" for k, v in described.items())
                                  if described else "not reported by this host's kernel"))
        if soc.get("ep_devices"):
            st.dataframe(frame([{**{k: v for k, v in d.items() if k != "metadata"},
                                        "metadata": short(d.get("metadata"), 200)} for d in soc["ep_devices"]]),
                         hide_index=True, width="stretch")
    else:
        st.caption("HTP arch / SoC: not reported by this worker's probe.")
    st.caption(f"Probed in {result.seconds:.1f} s.")
    if result.arch in ("x86_64", "AMD64") and result.initializes("htp"):
        st.caption(f"HTP figures on this host are measured on the {hardware_label('simulator')}: "
                   f"{SIMULATOR_NOTE}.")




def _doctor(url: str, device: Device) -> None:
    """The device doctor next to the probe: each reason a backend may not initialize, checked in
    the device's worker, with a one-line fix for every failure."""
    from dashboard.runtime.doctor import SYMBOLS, ask

    reports: dict = st.session_state.setdefault(_DOCTOR, {})
    if st.button("Doctor", key=f"doctor_{url}", icon=":material/stethoscope:",
                 help="Why each backend does or does not initialize here: FastRPC node, libcdsprpc, "
                      "ADSP_LIBRARY_PATH, glibc and Python, libOpenCL, the SoC and the wheel's skels"):
        with st.spinner(f"Asking the worker on {device.label} to check this host…"):
            try:
                reports[url] = ask(device, timeout=PROBE_TIMEOUT)
            except UserError as exc:
                reports[url] = str(exc)
    report = reports.get(url)
    if isinstance(report, str):
        st.error(md(report), icon=":material/wifi_off:")
    elif isinstance(report, DoctorReport):
        mode = "HTP simulator" if report.mode == "simulator" else report.mode
        st.markdown(f"**Doctor** · {md(report.platform)} · {md(mode)}")
        # Plain words (the CLI's), not emoji: where no emoji font exists they draw as empty boxes.
        st.dataframe(pd.DataFrame([{"": SYMBOLS[c.status], "check": c.title, "found": short(c.detail, 300),
                                    "fix": short(c.fix or "", 300)} for c in report.checks]),
                     hide_index=True, width="stretch")
        st.caption(md(report.summary))
