"""An emulated arm64 board: a Debian bookworm arm64 userland run under qemu-user, reached over a
real sshd on 127.0.0.1. The second machine of the device tests (``tests/test_board.py``).

Why: the worker's device path (``device install``, the ``manylinux_2_34_aarch64`` wheels, probe,
doctor, partition and timeline over SSH) must run somewhere other than the x86_64 host. This board
is an aarch64 Linux with glibc 2.36 and Python 3.11, like a Snapdragon board's OS, but with no
Hexagon DSP (no ``/dev/fastrpc-cdsp``, no ``libcdsprpc.so``) and no Adreno: the CPU EP works, HTP
and GPU fail, and the doctor must say why.

How (root on the host, no container engine):

- ``build()``: ``debootstrap --arch=arm64 --variant=minbase`` with python3, python3-venv,
  openssh-server and ca-certificates (about 5 minutes on a 2-core host: the packages' configure
  scripts run emulated), then a user ``lab`` with a generated key, an sshd drop-in config (keys
  only, no root, no forwarding) and this host's CA bundle (a network that intercepts TLS needs its
  CA on the board too, or pip on the board cannot reach PyPI). Cached under
  ``~/.cache/qnn-backend-lab/board`` (``QNN_LAB_BOARD_DIR``), rebuilt when ``RECIPE`` changes.
- arm64 binaries run through ``binfmt_misc`` with qemu-user-static's ``F`` (fix-binary) flag, so
  they run inside the chroot without qemu being there; ``ensure_binfmt`` mounts binfmt_misc and
  enables the ``qemu-aarch64`` entry when needed.
- ``Board.start()``: sshd runs as PID 1 of new mount and PID namespaces (``unshare --mount --pid
  --fork --kill-child``) chrooted into the userland, with a private ``/proc`` over which an ARM
  ``/proc/cpuinfo`` is bind-mounted (qemu-user passes the host's x86 cpuinfo through, and
  ``import onnxruntime`` hangs reading it), a read-only ``/sys`` and tmpfs ``/run``, ``/tmp`` and
  ``/dev/shm``. Killing ``unshare`` kills sshd (``--kill-child``), and with it every process of
  the namespace; the mounts disappear with it.

Run ``python scripts/board/emulated.py build`` to build or check the cache, ``... start`` to print
the device URL of a board that runs until Enter is pressed. ``exclusive()`` serializes users of
the cached board on one machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

SUITE = "bookworm"  # Python 3.11 and glibc 2.36: what the manylinux_2_34_aarch64 wheels need
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-venv", "openssh-server", "ca-certificates")
USER = "lab"
RECIPE = f"1 {SUITE} {' '.join(PACKAGES)} user={USER}"  # change it and cached boards are rebuilt
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BINFMT = Path("/proc/sys/fs/binfmt_misc")
SSHD_CONFIG = f"""# The emulated board's sshd: keys only, one user, nothing forwarded.
ListenAddress 127.0.0.1
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers {USER}
UsePAM no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitTunnel no
PrintMotd no
"""
CPU_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"


class BoardUnavailable(Exception):
    """This host cannot run the board (not root, no qemu-user, no binfmt_misc): the reason."""


def board_dir() -> Path:
    return Path(os.environ.get("QNN_LAB_BOARD_DIR", Path.home() / ".cache" / "qnn-backend-lab" / "board"))


def check_host() -> None:
    """Raise ``BoardUnavailable`` with the reason when this host cannot build or run the board."""
    if os.geteuid() != 0:
        raise BoardUnavailable("the emulated board needs root (debootstrap, chroot, mount namespaces)")
    for tool in ("qemu-aarch64-static", "debootstrap", "unshare", "chroot", "update-binfmts", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise BoardUnavailable(f"{tool} is missing: run `make system-deps` (qemu-user-static, binfmt-support, "
                                   "debootstrap, openssh)")
    ensure_binfmt()


def ensure_binfmt() -> None:
    """arm64 ELF files run through qemu-aarch64 (binfmt_misc, fix-binary flag)."""
    entry = BINFMT / "qemu-aarch64"
    if not (BINFMT / "register").exists():
        subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], capture_output=True)
    if not (BINFMT / "register").exists():
        raise BoardUnavailable(f"binfmt_misc cannot be mounted at {BINFMT} in this sandbox")
    if not entry.exists() or "enabled" not in entry.read_text():
        subprocess.run(["update-binfmts", "--enable", "qemu-aarch64"], capture_output=True)
    text = entry.read_text() if entry.exists() else ""
    if "enabled" not in text or "F" not in text.split("flags:", 1)[-1].split("\n", 1)[0]:
        raise BoardUnavailable("the qemu-aarch64 binfmt entry is not enabled with the fix-binary flag "
                               "(update-binfmts --enable qemu-aarch64)")


@dataclass
class Board:
    """A built board: its root file system, the key its user logs in with, the ARM cpuinfo."""

    root: Path

    @property
    def rootfs(self) -> Path:
        return self.root / "rootfs"

    @property
    def key(self) -> Path:
        return self.root / "keys" / "id_ed25519"

    @property
    def cpuinfo(self) -> Path:
        return self.root / "cpuinfo"

    @contextlib.contextmanager
    def start(self, log: Path, timeout: float = 120.0) -> Iterator["RunningBoard"]:
        """sshd of the board on a free port of 127.0.0.1, until the block ends."""
        port = _free_port()
        script = ('set -e; R="$1"; mount -t proc proc "$R/proc"; mount --bind "$2" "$R/proc/cpuinfo"; '
                  'mount -t sysfs -o ro sysfs "$R/sys"; mount -t tmpfs tmpfs "$R/run"; mkdir -p "$R/run/sshd"; '
                  'mount -t tmpfs tmpfs "$R/tmp"; mount -t tmpfs tmpfs "$R/dev/shm"; '
                  'exec chroot "$R" /usr/sbin/sshd -D -e -p "$3"')
        with open(log, "ab") as sink:
            server = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--kill-child", "--", "sh", "-c",
                                       script, "board", str(self.rootfs), str(self.cpuinfo), str(port)],
                                      stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
        try:
            _wait_for_port(port, server, timeout, log)
            yield RunningBoard(self, port)
        finally:
            server.kill()  # --kill-child: sshd (PID 1 of the namespace) and everything under it die
            server.wait(timeout=30)


@dataclass
class RunningBoard:
    board: Board
    port: int

    def url(self, known_hosts: Path, **query: str) -> str:
        """The device URL of the board's user (host key accepted on first use into ``known_hosts``,
        created empty here: a device's known_hosts must be an existing file)."""
        known_hosts.touch(exist_ok=True)
        extra = "".join(f"&{k}={v}" for k, v in query.items())
        return (f"ssh://{USER}@127.0.0.1:{self.port}?identity={self.board.key}&host_key=accept-new"
                f"&known_hosts={known_hosts}&connect_timeout=60{extra}")


@contextlib.contextmanager
def exclusive(root: Path | None = None) -> Iterator[None]:
    """One user of the cached board at a time (two test runs on one machine would otherwise build
    into, and pip install into, the same root file system together)."""
    import fcntl

    folder = root or board_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build(root: Path | None = None, log: Callable[[str], None] = print) -> Board:
    """The board under ``root`` (default ``board_dir()``), built unless a board of this ``RECIPE``
    is cached there."""
    check_host()
    board = Board(root or board_dir())
    stamp = board.rootfs / ".qnn-lab-board"
    if stamp.is_file() and stamp.read_text() == RECIPE and board.key.is_file():
        return board
    board.root.mkdir(parents=True, exist_ok=True)
    os.chmod(board.root, 0o700)
    partial = board.root / "rootfs.partial"
    shutil.rmtree(partial, ignore_errors=True)
    started = time.monotonic()
    log(f"debootstrap {SUITE} arm64 into {partial} (minutes: package scripts run under qemu)")
    done = subprocess.run(["debootstrap", "--arch=arm64", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                           SUITE, str(partial), MIRROR], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"debootstrap failed: {' | '.join(tail)}")
    _configure(board, partial)
    shutil.rmtree(board.rootfs, ignore_errors=True)
    partial.rename(board.rootfs)
    (board.rootfs / ".qnn-lab-board").write_text(RECIPE)
    log(f"board built in {time.monotonic() - started:.0f} s")
    return board


def _configure(board: Board, rootfs: Path) -> None:
    """The user, its key, sshd's config, the CA bundle and the ARM cpuinfo."""
    _chroot(rootfs, "useradd", "--create-home", "--shell", "/bin/bash", USER)
    _chroot(rootfs, "usermod", "--password", "*", USER)  # no password, and not "locked": sshd lets keys in
    board.key.parent.mkdir(parents=True, exist_ok=True)
    board.key.unlink(missing_ok=True)
    board.key.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "qnn-lab-board", "-f", str(board.key)],
                   check=True)
    ssh_dir = rootfs / "home" / USER / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(board.key.with_suffix(".pub").read_text())
    _chroot(rootfs, "chown", "-R", f"{USER}:{USER}", f"/home/{USER}/.ssh")
    (rootfs / "etc" / "ssh" / "sshd_config.d" / "board.conf").write_text(SSHD_CONFIG)
    if HOST_CA_BUNDLE.is_file():
        shutil.copyfile(HOST_CA_BUNDLE, rootfs / "etc" / "ssl" / "certs" / "ca-certificates.crt")
    (rootfs / "etc" / "pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
    cpus = os.cpu_count() or 1
    board.cpuinfo.write_text("".join(
        f"processor\t: {i}\nBogoMIPS\t: 38.40\nFeatures\t: {CPU_FEATURES}\nCPU implementer\t: 0x41\n"
        f"CPU architecture: 8\nCPU variant\t: 0x4\nCPU part\t: 0xd0b\nCPU revision\t: 1\n\n" for i in range(cpus)))


def _chroot(rootfs: Path, *argv: str) -> None:
    subprocess.run(["chroot", str(rootfs), *argv], check=True, capture_output=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, server: subprocess.Popen, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the board's sshd exited: {log.read_text(errors='replace')[-500:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"the board's sshd did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "build"
    with exclusive():
        try:
            board = build()
        except BoardUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if command == "build":
            print(board.root)
            return 0
        with board.start(board.root / "sshd.log") as running:
            print(running.url(board.root / "known_hosts"))
            input("board running; press Enter to stop it\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
