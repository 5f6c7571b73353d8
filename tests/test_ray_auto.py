"""``sweep --ray auto``: the address file Ray's ``auto`` reads (``<tmp>/ray/ray_current_cluster``,
in a folder Ray makes writable by every user) is trusted only when it is this user's own, not
writable by others, and its address passes the checks a given address does; a stale address is
one error line, never a hang; the line that says what ``auto`` found; the warning about a
session folder other users can write. Real files, a real second user (uid 65534, ``nobody``),
real listeners, and the real loopback Ray cluster of ``tests/ray_cluster.py``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from ray_cluster import RAY, ray_cluster
from sweep_helpers import write_spec

from dashboard.errors import UserError
from dashboard.sweep import ray_exec

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
CHILD_DEADLINE = 300  # seconds for a `sweep` child that must fail: stuck, not slow, on a loaded machine
SWEEP_DEADLINE = 900  # a one-cell sweep on the cluster


@pytest.fixture
def ray_tmp():
    """A temp folder for Ray (``RAY_TMPDIR``) that another user can reach, with ``ray/`` mode 0777
    and no sticky bit, as Ray leaves ``/tmp/ray``."""
    base = Path(tempfile.mkdtemp(prefix="qlauto", dir="/tmp"))
    base.chmod(0o755)
    (base / "ray").mkdir()
    (base / "ray").chmod(0o777)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def listener(answer: bytes | None = None):
    """A TCP listener on loopback that accepts and then says ``answer`` (None: nothing, ever),
    as a port that something other than Ray took after the cluster went away does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.setblocking(False)
    held: list[socket.socket] = []
    import threading

    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except (BlockingIOError, OSError):
                stop.wait(0.01)
                continue
            held.append(connection)
            if answer is not None:
                connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], held
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        server.close()


def sweep_auto(spec: Path, out: Path, ray_tmp: Path, timeout: float = CHILD_DEADLINE,
               env: dict[str, str] | None = None):
    clean = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and not k.startswith("RAY_AUTH")}
    return subprocess.run([sys.executable, "-m", "dashboard", "sweep", str(spec), "--out", str(out), "--ray", "auto",
                           "--json"], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**clean, "PYTHONPATH": str(ROOT), "RAY_TMPDIR": str(ray_tmp),
                               "QNN_LAB_CACHE": str(out.parent / "cache"), **(env or {})})


def one_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


def classify_spec(folder: Path) -> Path:
    return write_spec(folder / "spec.toml", f'models = ["{ROOT / "samples" / "cnn_classifier.onnx"}"]\n'
                      'socs = ["sm8650"]\nanalyses = ["classify"]\n')


def needs_ray() -> None:
    if not Path(RAY).exists():
        pytest.skip("Ray is not installed in this environment; `make test` installs it")


# -- whose file ---------------------------------------------------------------------------------------
def test_an_address_file_another_user_wrote_is_refused_and_never_connected_to(tmp_path, ray_tmp):
    """The issue's attack: a second local user (a real process running as uid 65534) writes a port
    into the shared folder; the sweep refuses the file in one line and never connects there."""
    needs_ray()
    with listener(answer=None) as (port, connections):
        written = subprocess.run(["/bin/sh", "-c", f"printf '127.0.0.1:{port}' > {ray_tmp}/ray/ray_current_cluster"],
                                 user=NOBODY, group=NOBODY, capture_output=True, text=True, timeout=60)
        assert written.returncode == 0, written.stderr
        assert (ray_tmp / "ray" / "ray_current_cluster").stat().st_uid == NOBODY
        error = one_error(sweep_auto(classify_spec(tmp_path), tmp_path / "out", ray_tmp))
        assert connections == []
    assert f"belongs to uid {NOBODY}" in error and "ray_current_cluster" in error, error
    assert not (tmp_path / "out" / "cells").exists() or not any((tmp_path / "out" / "cells").iterdir())


def _chowned(path: Path) -> None:
    os.chown(path, NOBODY, NOBODY)


def _world_writable(path: Path) -> None:
    path.chmod(0o666)


def _group_writable(path: Path) -> None:
    path.chmod(0o664)


def _symlink_to_own_file(path: Path) -> None:
    target = path.parent.parent / "elsewhere"
    os.replace(path, target)
    path.symlink_to(target)


def _hard_link(path: Path) -> None:
    os.link(path, path.parent.parent / "another-name")


@pytest.mark.parametrize("spoil, why", [(_chowned, f"belongs to uid {NOBODY}"),
                                         (_world_writable, "writable by others (mode 666)"),
                                         (_group_writable, "writable by others (mode 664)"),
                                         (_symlink_to_own_file, "not a regular file"),
                                         (_hard_link, "has 2 hard links")])
def test_an_address_file_others_may_have_written_is_refused(ray_tmp, monkeypatch, spoil, why):
    path = ray_tmp / "ray" / "ray_current_cluster"
    path.write_text("127.0.0.1:6379")
    path.chmod(0o644)
    assert ray_exec.read_address_file(path) == "127.0.0.1:6379"  # this user's own file: trusted
    spoil(path)
    with pytest.raises(UserError) as refused:
        ray_exec.read_address_file(path)
    assert why in str(refused.value) and "refusing" in str(refused.value)


@pytest.mark.parametrize("content", ["", "not an address", "127.0.0.1:6379\x1b]0;owned\x07", "host:99999",
                                     "127.0.0.1:6379\n" + "x" * 5000])
def test_an_address_file_without_an_address_is_one_line_that_does_not_echo_it(ray_tmp, content):
    path = ray_tmp / "ray" / "ray_current_cluster"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(UserError) as refused:
        ray_exec.read_address_file(path)
    message = str(refused.value)
    assert "\n" not in message and "\x1b" not in message and len(message) < 400, message


def test_no_address_file_is_one_line_and_no_search_for_other_clusters(ray_tmp, monkeypatch):
    """Ray's own ``auto`` would then connect to any cluster running on the machine (found in the
    process list), another user's included."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
    with pytest.raises(UserError) as refused:
        ray_exec.resolve_auto()
    assert "no Ray cluster is recorded on this machine" in str(refused.value)


def test_ray_address_wins_over_the_file_as_in_ray(ray_tmp, monkeypatch):
    path = ray_tmp / "ray" / "ray_current_cluster"
    path.write_text("127.0.0.1:6379")
    os.chown(path, NOBODY, NOBODY)  # not read at all when RAY_ADDRESS names the cluster
    monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:7000")
    assert ray_exec.resolve_auto() == ("127.0.0.1:7000", "RAY_ADDRESS")
    monkeypatch.setenv("RAY_ADDRESS", "auto")  # Ray reads the file then
    with pytest.raises(UserError, match="belongs to uid"):
        ray_exec.resolve_auto()


@pytest.mark.parametrize("env", [{"RAY_TMPDIR": "/tmp/qlauto-a"}, {"TMPDIR": "/tmp/qlauto-b"},
                                 {"RAY_TMPDIR": "/tmp/qlauto-c", "TMPDIR": "/tmp/qlauto-d"}, {}])
def test_the_address_file_is_the_one_ray_itself_reads(monkeypatch, env):
    needs_ray()
    for name in ("RAY_TMPDIR", "TMPDIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from ray._common.utils import get_ray_address_file  # Ray's own rule, private: checked here, not used

    assert str(ray_exec.address_file()) == get_ray_address_file(None)


# -- stale -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["nothing listens", "silent listener", "http/1 server"])
def test_a_stale_address_is_one_error_line_not_a_hang(tmp_path, ray_tmp, answer):
    """The address file outlived its cluster: the port is closed, or something else holds it now
    (which kept Ray's own ``auto`` retrying for minutes). One line, exit 2, nothing written."""
    needs_ray()
    reply = {"silent listener": None, "http/1 server": b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"}
    path = ray_tmp / "ray" / "ray_current_cluster"
    if answer == "nothing listens":
        from e2e_helpers import free_port

        path.write_text(f"127.0.0.1:{free_port()}")
        done = sweep_auto(classify_spec(tmp_path), tmp_path / "out", ray_tmp)
    else:
        with listener(reply[answer]) as (port, _):
            path.write_text(f"127.0.0.1:{port}")
            done = sweep_auto(classify_spec(tmp_path), tmp_path / "out", ray_tmp)
    error = one_error(done)
    assert f"--ray auto (127.0.0.1:" in error and str(path) in error, error
    assert "cannot reach the Ray cluster" in error or "no Ray cluster answers there" in error, error
    assert not (tmp_path / "out" / "cells").exists() or not any((tmp_path / "out" / "cells").iterdir())


# -- the session folder ------------------------------------------------------------------------------------
def test_the_session_warning_names_a_folder_others_can_reach_and_write(tmp_path):
    shared = Path(tempfile.mkdtemp(prefix="qlsess", dir="/tmp"))
    try:
        shared.chmod(0o755)
        session = shared / "ray" / "session_1"
        session.mkdir(parents=True)
        session.chmod(0o777)
        session.parent.chmod(0o777)
        warning = ray_exec.session_warning(str(session))
        assert warning and str(session) in warning and "--temp-dir" in warning
        shared.chmod(0o700)  # a private --temp-dir: the same 0777 folders, out of other users' reach
        assert ray_exec.session_warning(str(session)) is None
        shared.chmod(0o755)
        session.chmod(0o755)
        assert ray_exec.session_warning(str(session)) is None
        assert ray_exec.session_warning(str(tmp_path / "not-on-this-machine")) is None
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_auto_finds_the_users_own_cluster_says_so_and_warns_once_when_its_session_folder_is_shared(tmp_path, ray_tmp):
    """A valid address file (this user's, mode 0644, as ``ray start`` writes it) naming the real
    loopback cluster: the sweep says in one line what it found and runs there. The cluster's
    temp dir is private (its parent mode 0700): no warning; made reachable by every user, the
    next sweep warns exactly once."""
    needs_ray()
    spec = classify_spec(tmp_path)
    with ray_cluster(nodes=1, env={"QNN_LAB_CACHE": str(tmp_path / "cache-nodes")}) as cluster:
        path = ray_tmp / "ray" / "ray_current_cluster"
        path.write_text(cluster.address)
        path.chmod(0o644)
        done = sweep_auto(spec, tmp_path / "out", ray_tmp, timeout=SWEEP_DEADLINE)
        assert done.returncode == 0, done.stderr[-3000:]
        found = [line for line in done.stderr.splitlines() if line.startswith("ray: auto is")]
        assert found == [f"ray: auto is the cluster at {cluster.address}, from {path}"], done.stderr[-3000:]
        cells = json.loads(done.stdout)["cells"]
        assert [c["status"] for c in cells] == ["ok"] and cells[0]["executor"] == "ray", cells
        assert "session folder" not in done.stderr
        private = cluster.nodes[0].temp_dir.parent
        assert private.stat().st_mode & 0o777 == 0o700
        private.chmod(0o755)
        again = sweep_auto(spec, tmp_path / "out-shared", ray_tmp, timeout=SWEEP_DEADLINE)
        private.chmod(0o700)
    assert again.returncode == 0, again.stderr[-3000:]
    warnings = [line for line in again.stderr.splitlines() if "session folder" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: the Ray cluster's session folder "), again.stderr
    assert str(private) in warnings[0]


def test_the_documented_safe_cluster_takes_the_sweep_with_its_token_and_refuses_it_without(tmp_path):
    """docs/sweeps.md's recipe, step by step: a token made by ``ray get-auth-token --generate``,
    Ray's folders under a ``RAY_TMPDIR`` only the user may enter, ``RAY_AUTH_MODE=token`` for the
    cluster and the sweep: ``--ray auto`` finds the cluster there and runs on it without a
    warning; a sweep without the token is refused in one error line."""
    needs_ray()
    home = tmp_path / "home"
    home.mkdir()
    made = subprocess.run([RAY, "get-auth-token", "--generate"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"})
    assert made.returncode == 0 and (home / ".ray" / "auth_token").is_file(), made.stderr[-2000:]
    auth = {"HOME": str(home), "RAY_AUTH_MODE": "token"}
    spec = classify_spec(tmp_path)
    with ray_cluster(nodes=1, env={**auth, "QNN_LAB_CACHE": str(tmp_path / "cache-nodes")}, ray_tmpdir=True) as cluster:
        private = cluster.nodes[0].temp_dir
        assert private.stat().st_mode & 0o777 == 0o700
        done = sweep_auto(spec, tmp_path / "out", private, timeout=SWEEP_DEADLINE, env=auth)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"ray: auto is the cluster at {cluster.address}, from {private / 'ray' / 'ray_current_cluster'}" \
            in done.stderr.splitlines(), done.stderr[-3000:]
        assert [c["status"] for c in json.loads(done.stdout)["cells"]] == ["ok"]
        assert "session folder" not in done.stderr
        other_home = tmp_path / "other"
        other_home.mkdir()
        refused = sweep_auto(spec, tmp_path / "out-refused", private, env={"HOME": str(other_home)})
    error = one_error(refused)
    assert "cannot reach the Ray cluster" in error and "RAY_AUTH_MODE=token" in error, error
    assert not (tmp_path / "out-refused" / "cells").exists() or not any((tmp_path / "out-refused" / "cells").iterdir())
