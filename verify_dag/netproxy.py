"""The package index, and nothing else, for provisioning inside the sandbox.

Provisioning (pip, uv, tox, nox and npm installs, where build backends and ``setup.py`` files run)
needs the package index; nothing of the host's (its loopback services: the broker, a database)
and nothing else of the internet. Under bubblewrap it runs in a network namespace of its own whose
only way out is a Unix socket bound into the sandbox. The worker serves an HTTP proxy on that socket
(:func:`serving`) which connects to the index hosts alone; this file, run inside as the step's
first process (:func:`main`), listens on the namespace's loopback and relays each connection to
the socket, with the installers' proxy variables pointing at it.

Standard library only, and run inside as ``python -I netproxy.py``: isolated mode reads no
variable of the repository's environment and puts no directory of its own on ``sys.path``.
"""

from __future__ import annotations

import base64
import configparser
import contextlib
import os
import selectors
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

HOSTS_ENV = "VERIFY_DAG_INDEX_HOSTS"
# PyPI, its file host and npm's registry: the indexes an installer uses when none is configured.
DEFAULT_HOSTS = ("pypi.org:443", "files.pythonhosted.org:443", "registry.npmjs.org:443")
# Where installers are told of other indexes: their variables and pip's system config files (a
# user's pip.conf is in the worker's home, which provisioning does not see).
INDEX_VARS = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "UV_FIND_LINKS",
    "NPM_CONFIG_REGISTRY",
    "npm_config_registry",
)
PIP_CONFIGS = ("/etc/pip.conf", "/etc/xdg/pip/pip.conf")
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
_HEAD_MAX = 64 * 1024
_IDLE = 300.0  # seconds a relayed connection may stay silent


def _host_port(text: str, default: int) -> tuple[str, int] | None:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        host, port = text, str(default)
    host = host.strip("[]").lower()
    return (host, int(port)) if host else None


def _from_url(url: str) -> tuple[str, int] | None:
    url = url.split("=", 1)[1] if "=" in url.split("://", 1)[0] else url  # UV_INDEX: name=url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.hostname.lower(), parts.port or (443 if parts.scheme == "https" else 80)


def allowed(env: Mapping[str, str]) -> frozenset[tuple[str, int]]:
    """The (host, port) pairs provisioning may reach: the default indexes, those the step's
    environment and pip's system config name, and the operator's ``$VERIFY_DAG_INDEX_HOSTS``
    (comma-separated host[:port], default port 443: a mirror's file host, a git server)."""
    found = {hp for hp in map(lambda t: _host_port(t, 443), DEFAULT_HOSTS) if hp}
    urls = [u for var in INDEX_VARS for u in env.get(var, "").replace(",", " ").split()]
    for path in PIP_CONFIGS:
        parser = configparser.ConfigParser(interpolation=None)
        with contextlib.suppress(OSError, configparser.Error):
            parser.read(path, encoding="utf-8")
        for section in parser.sections():
            for key in ("index-url", "extra-index-url", "find-links"):
                urls += parser.get(section, key, fallback="").split()
    found |= {hp for hp in map(_from_url, urls) if hp}
    for item in os.environ.get(HOSTS_ENV, "").split(","):
        hp = _host_port(item.strip(), 443) if item.strip() else None
        if hp:
            found.add(hp)
    return frozenset(found)


def _upstream() -> tuple[tuple[str, int], bytes] | None:
    """The worker's own proxy, if it has one (provisioning then goes through it), and the
    Proxy-Authorization header its URL's credentials make."""
    for name in PROXY_VARS:
        parts = urlsplit(os.environ.get(name, ""))
        if parts.hostname:
            auth = b""
            if parts.username is not None:
                pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
                token = base64.b64encode(pair.encode()).decode()
                auth = f"Proxy-Authorization: Basic {token}\r\n".encode()
            return (parts.hostname, parts.port or 80), auth
    return None


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk or len(data) > _HEAD_MAX:
            return b""
        data += chunk
    return data


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes or both stay silent for :data:`_IDLE`."""
    with selectors.DefaultSelector() as sel:
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        while True:
            ready = sel.select(_IDLE)
            if not ready:
                return
            for key, _ in ready:
                src: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    chunk = src.recv(65536)
                    if not chunk:
                        return
                    key.data.sendall(chunk)
                except OSError:
                    return


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(30)
        head = _read_head(conn)
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        target, _, version = rest.partition(" ")
        if method == "CONNECT":
            dest = _host_port(target, 443)
            forward = b""
        else:
            parts = urlsplit(target)
            dest = (parts.hostname.lower(), parts.port or 80) if parts.hostname else None
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            forward = f"{method} {path} {version}".encode("latin-1") + head[len(line) :]
        if dest is None or dest not in self.server.hosts:
            self.server.refused.append(f"{dest[0]}:{dest[1]}" if dest else line[:80])
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            out = self._open(dest, method, head)
        except OSError as exc:
            conn.sendall(f"HTTP/1.1 502 Bad Gateway ({exc})\r\n\r\n".encode("latin-1", "replace"))
            return
        with out:
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            elif self.server.upstream is None:
                out.sendall(forward)
            conn.settimeout(None)
            _relay(conn, out)

    def _open(self, dest: tuple[str, int], method: str, head: bytes) -> socket.socket:
        upstream = self.server.upstream
        if upstream is None:
            return socket.create_connection(dest, timeout=30)
        (where, auth) = upstream
        out = socket.create_connection(where, timeout=30)
        if method != "CONNECT":
            first, _, tail = head.partition(b"\r\n")
            out.sendall(first + b"\r\n" + auth + tail)  # the absolute URL, as a proxy wants it
            return out
        out.sendall(f"CONNECT {dest[0]}:{dest[1]} HTTP/1.1\r\n".encode() + auth + b"\r\n")
        answer = _read_head(out)
        if b" 200" not in answer.split(b"\r\n", 1)[0]:
            out.close()
            raise OSError(f"the upstream proxy refused {dest[0]}:{dest[1]}")
        return out


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, hosts: frozenset[tuple[str, int]]) -> None:
        self.hosts = hosts
        self.upstream = _upstream()
        self.refused: list[str] = []
        super().__init__(path, _Handler)


# A Unix socket's path holds at most 107 bytes (sun_path): under a long $TMPDIR (a deep work
# directory) binding would fail, so the socket's directory is then made in /tmp.
_SOCKET_ROOM = 107 - len("/vd-net-XXXXXXXX/proxy.sock")


def _socket_parent() -> str:
    tmp = tempfile.gettempdir()
    return tmp if len(os.fsencode(tmp)) <= _SOCKET_ROOM else "/tmp"


@contextlib.contextmanager
def serving(env: Mapping[str, str]) -> Iterator[tuple[Path, list[str]]]:
    """A proxy to the indexes ``env`` names, on a Unix socket in a private directory, for the
    block; yields the socket's path and the destinations it refused so far."""
    with tempfile.TemporaryDirectory(prefix="vd-net-", dir=_socket_parent()) as tmp:
        path = Path(tmp) / "proxy.sock"
        server = _Server(str(path), allowed(env))
        thread = threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True)
        thread.start()
        try:
            yield path, server.refused
        finally:
            server.shutdown()
            server.server_close()


def command(sock: Path, argv: list[str]) -> list[str]:
    """``argv`` run behind the relay inside the sandbox: this file, by path, in isolated mode."""
    return [sys.executable, "-I", str(Path(__file__).resolve()), str(sock), "--", *argv]


def _serve_loopback(listener: socket.socket, sock: str) -> None:
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_pair, args=(conn, sock), daemon=True).start()


def _pair(conn: socket.socket, sock: str) -> None:
    with conn, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as out:
        try:
            out.connect(sock)
        except OSError:
            return
        _relay(conn, out)


def main(argv: list[str]) -> int:
    """Inside the sandbox: relay 127.0.0.1:<free port> to the proxy's socket, run the command
    with every installer's proxy settings pointing there, and exit as it exits."""
    sock, sep, cmd = argv[0], argv[1], argv[2:]
    if sep != "--" or not cmd:
        print("usage: netproxy.py SOCKET -- COMMAND...", file=sys.stderr)
        return 2
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = dict(os.environ)
    for name in (*PROXY_VARS, "ALL_PROXY", "all_proxy", "npm_config_proxy"):
        env[name] = url
    env["npm_config_https_proxy"] = url
    for name in ("NO_PROXY", "no_proxy"):
        env.pop(name, None)
    threading.Thread(target=_serve_loopback, args=(listener, sock), daemon=True).start()
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as exc:
        print(f"{cmd[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
