"""The sandbox without bubblewrap: the view of :mod:`verify_dag.sandbox.view`, built by hand.

Run by path as ``python -I -S inside.py ROOT PLAN -- COMMAND...`` as the first process of
``unshare --user --map-root-user --mount --pid --fork ...`` (util-linux): it is root of a user
namespace of its own and owns a private mount namespace, so it may mount. It applies the plan's
operations under ROOT (an empty directory) with their sources read from the host's tree,
exactly as bubblewrap applies them under its new root, then:

- brings the network namespace's loopback up (the index relay listens there);
- enters one more user namespace in which it is uid and gid 65534 (nobody), so that the command
  runs with no capability at all: it can neither unmount what hides the host nor remount what is
  read-only, and the mounts made above are locked in place for it;
- changes root to ROOT and the directory to the plan's ``chdir``;
- executes the command.

Any failure before the command runs exits 125 with one line on stderr and runs nothing: a
half-built view must never run repository code.

Standard library only, and no import of verify-dag: ``-I -S`` read nothing of the repository's
environment and no site directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import socket
import struct
import sys

SANDBOX_ID = 65534
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_RELATIME = 16384, 1 << 21
CLONE_NEWUSER = 0x10000000
# statvfs flags and the mount flags they stand for: a bind remount must repeat the flags the
# mount already has (nosuid, nodev, ...), or a user namespace refuses to change it.
_KEEP = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


def _mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str = "") -> None:
    def b(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    if _libc.mount(b(src), b(dst), b(fstype), flags, b(data) if data else None) != 0:
        code = ctypes.get_errno()
        raise SetupError(f"mount {src or fstype} on {dst}: {os.strerror(code)}", code)


def _unescape(field: str) -> str:
    # /proc/self/mountinfo writes space, tab, newline and backslash as octal escapes.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mounts_under(top: str) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        points = [_unescape(line.split()[4]) for line in fh]
    top = os.path.normpath(top)
    prefix = top.rstrip("/") + "/"
    return [p for p in dict.fromkeys(points) if p == top or p.startswith(prefix)]


def _restrict(top: str, add: int, *, recursive: bool = True) -> None:
    """``top`` (and every mount below it) remounted with the flags ``add`` too, each keeping
    the flags it has."""
    for point in _mounts_under(top) if recursive else [os.path.normpath(top)]:
        try:
            flags = os.statvfs(point).f_flag
        except OSError:
            continue  # under a mount that hides it: nothing to reach
        keep = sum(ms for st, ms in _KEEP.items() if flags & st)
        if flags & os.ST_RDONLY:
            keep |= MS_RDONLY  # read-only stays read-only: nothing here makes a mount writable
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | add | keep)
        except SetupError as exc:
            # As bubblewrap: a mount point this namespace cannot even read is not reachable.
            if exc.code != errno.EACCES:
                raise


def _target(root: str, path: str) -> str:
    return os.path.normpath(root.rstrip("/") + "/" + path.lstrip("/"))


def _mount_point(src: str, dst: str) -> None:
    if os.path.isdir(src):
        os.makedirs(dst, mode=0o755, exist_ok=True)
    elif not os.path.exists(dst):
        os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
        with open(dst, "a", encoding="utf-8"):
            pass


def _dev(dst: str) -> None:
    """A minimal /dev, as bubblewrap's ``--dev``: the harmless devices, no disk of the host."""
    _mount("tmpfs", dst, "tmpfs", MS_NOSUID, "mode=0755")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            _mount_point(f"/dev/{name}", f"{dst}/{name}")
            _mount(f"/dev/{name}", f"{dst}/{name}", None, MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("core", "/proc/kcore"),
    ):
        os.symlink(target, f"{dst}/{name}")
    os.makedirs(f"{dst}/shm", mode=0o755)
    os.makedirs(f"{dst}/pts", mode=0o755)
    try:
        pts = "newinstance,ptmxmode=0666,mode=620"
        _mount("devpts", f"{dst}/pts", "devpts", MS_NOSUID | MS_NOEXEC, pts)
        os.symlink("pts/ptmx", f"{dst}/ptmx")
    except SetupError:
        pass  # no terminals: a suite that opens a pty sees the error it would see elsewhere


def apply(root: str, ops: list[list[str]]) -> str:
    """Build the view under ``root``; the directory the command starts in."""
    chdir = "/"
    for kind, *args in ops:
        if kind in ("ro-bind", "bind"):
            src, dst = args[0], _target(root, args[1])
            _mount_point(src, dst)
            _mount(src, dst, None, MS_BIND | MS_REC)
            # As bubblewrap's binds: no set-uid program and no device node of the host works
            # through them, and --ro-bind is read-only all the way down.
            _restrict(dst, MS_NOSUID | MS_NODEV | (MS_RDONLY if kind == "ro-bind" else 0))
        elif kind == "tmpfs":
            dst, size = _target(root, args[0]), args[1]
            os.makedirs(dst, mode=0o755, exist_ok=True)
            data = f"mode=0755,size={size}" if size else "mode=0755"
            _mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, data)
        elif kind == "dev":
            _dev(_target(root, args[0]))
        elif kind == "proc":
            _mount("proc", _target(root, args[0]), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        elif kind == "dir":
            os.makedirs(_target(root, args[0]), mode=0o755, exist_ok=True)
        elif kind == "remount-ro":
            # As bubblewrap's: the mount itself, not what was bound inside it since (a step's
            # writable checkout inside the hidden cache of runs stays writable).
            _restrict(_target(root, args[0]), MS_RDONLY, recursive=False)
        elif kind == "chdir":
            chdir = args[0]
        else:
            raise SetupError(f"unknown operation {kind!r}")
    return chdir


def _loopback_up() -> None:
    """``ip link set lo up`` without iproute2: a new network namespace starts with it down."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, siocgifflags, req))[1]
        if not flags & iff_up:
            fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def _become_nobody() -> None:
    if _libc.unshare(CLONE_NEWUSER) != 0:
        raise SetupError(f"unshare(CLONE_NEWUSER): {os.strerror(ctypes.get_errno())}")
    # Our uid in the namespace we leave is 0; the new one maps nobody to it, and nothing else.
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{SANDBOX_ID} 0 1"),
        ("gid_map", f"{SANDBOX_ID} 0 1"),
    ):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as fh:
            fh.write(text)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: inside.py ROOT PLAN -- COMMAND...", file=sys.stderr)
        return 125
    root, ops, command = argv[0], json.loads(argv[1]), argv[3:]
    try:
        chdir = apply(root, ops)
        # In the host's network namespace (a provisioning step) loopback is up already.
        with contextlib.suppress(OSError):
            _loopback_up()
        # unshare(2) refuses a new user namespace to a chrooted caller: first nobody, then the
        # root (the capabilities of the new namespace's creator last until the command starts).
        _become_nobody()
        os.chroot(root)
        os.chdir(chdir)
        os.setsid()
    except (SetupError, OSError) as exc:
        print(f"verify-dag sandbox (unshare): {exc}", file=sys.stderr)
        return 125
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"verify-dag sandbox (unshare): {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
