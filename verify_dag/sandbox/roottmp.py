"""Run bubblewrap so that the sandbox's /tmp belongs to another account, as on any machine.

Started as ``python -I -S roottmp.py MOUNTPOINT SIZE -- bwrap ARGS...`` by a worker running as
root (:func:`verify_dag.sandbox._bwrap_prefix`); this file imports nothing but the standard
library, since it runs before any environment is set up.

Why: a maintainer's suite runs as an ordinary user under a sticky /tmp that root owns, and some
suites test exactly that (filelock refuses a lock directory of another account only under such a
parent). A user namespace that bubblewrap makes alone maps one uid, the sandbox's, and every file
of an unmapped owner shows as the overflow uid 65534, which is the sandbox's uid itself, so
bubblewrap's own tmpfs, and anything else, looks like the sandbox's own. A root worker may write a
user namespace's map of more than one uid; bubblewrap's ``--userns-block-fd`` waits while it does.
So this launcher, in a private mount namespace of its own,

1. mounts a tmpfs of SIZE bytes on MOUNTPOINT, mode 1777 and owned by the host's 65534 (nobody);
   bubblewrap binds it as the sandbox's /tmp (the plan says so);
2. starts bubblewrap with ``--info-fd`` and ``--userns-block-fd``, learns its child's pid, and maps
   the sandbox's uid 65534 to root (the worker: its files stay the sandbox's own, as with
   bubblewrap's own map) and uid 0 to the host's nobody, whose tmpfs then shows as root's;
3. lets bubblewrap go on, and ends as it ends (its exit code, or its signal).

The mount is in this process's namespace only: nothing is left on the host, and the tmpfs goes
when bubblewrap's last process does.
"""

from __future__ import annotations

# Only what the interpreter has built in, and ctypes: this runs in front of every sandboxed
# command of a root worker, where subprocess, json and re took 12-26 ms more to import.
import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_PDEATHSIG = 1
SIGKILL = 9
# Inside: the sandbox's uid is the worker (root) outside; root inside is the host's nobody.
MAP = "65534 0 1\n0 65534 1\n"
OWNER = 65534  # the tmpfs's owner outside, root inside by MAP

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")


def _tmpfs(mountpoint: str, size: str) -> None:
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Private first: the tmpfs must not show up in the host's mount table.
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    os.makedirs(mountpoint, exist_ok=True)
    data = f"mode=1777,uid={OWNER},gid={OWNER},size={size}".encode()
    _check(
        _libc.mount(b"tmpfs", mountpoint.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, data),
        f"mount tmpfs on {mountpoint}",
    )


def _child_pid(info: int) -> int | None:
    data = b""
    while chunk := os.read(info, 4096):
        data += chunk
    # bubblewrap's JSON: {"child-pid": 1234, ...}; none when it ended before its child ran,
    # and its own message then says why.
    _, key, rest = data.partition(b'"child-pid":')
    digits = rest.lstrip()[:12]
    digits = digits[: len(digits) - len(digits.lstrip(b"0123456789"))]
    return int(digits) if key and digits else None


def _map(pid: int) -> None:
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w", encoding="ascii") as fh:
            fh.write(MAP)


def main(argv: list[str]) -> int:
    mountpoint, size, sep, *command = argv
    if sep != "--" or not command:
        raise SetupError("usage: roottmp.py MOUNTPOINT SIZE -- bwrap ARGS...")
    # Die with the worker, as bubblewrap dies with this process (--die-with-parent).
    _libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
    _tmpfs(mountpoint, size)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    full = [command[0], "--info-fd", str(info_w), "--userns-block-fd", str(block_r), *command[1:]]
    pid = os.fork()
    if pid == 0:
        try:
            os.close(info_r)
            os.close(block_w)
            os.set_inheritable(info_w, True)
            os.set_inheritable(block_r, True)
            os.execvp(full[0], full)
        except OSError as exc:
            message = f"verify-dag sandbox (bubblewrap, root): {full[0]}: {exc.strerror}\n"
            os.write(2, message.encode())
        os._exit(127)
    os.close(info_w)
    os.close(block_r)
    child = _child_pid(info_r)
    if child is not None:
        try:
            _map(child)
        except OSError as exc:
            os.kill(pid, SIGKILL)
            os.waitpid(pid, 0)
            raise SetupError(f"writing the user namespace's map: {exc.strerror}") from exc
        os.write(block_w, b"1")
    os.close(block_w)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        # Killed: end the same way, so that the caller sees the signal, not a number.
        import signal  # only here: it costs every other command 3 ms

        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (SetupError, ValueError) as exc:
        print(f"verify-dag sandbox (bubblewrap, root): {exc}", file=sys.stderr)
        sys.exit(125)
