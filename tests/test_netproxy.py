"""verify_dag/netproxy.py: which hosts provisioning may reach, and what it says of the others."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verify_dag import netproxy, processes, sandbox
from verify_dag.sandbox import Policy


def test_the_indexes_the_environment_and_the_operator_name_are_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(netproxy.HOSTS_ENV, "git.example.com, files.internal:8080")
    env = {
        "UV_INDEX": "internal=https://pypi.internal:8443/simple other=https://u:p@b.example/s",
        "PIP_EXTRA_INDEX_URL": "http://mirror.local/simple file:///opt/pypi/simple",
        "NPM_CONFIG_REGISTRY": "https://npm.internal/",
    }
    hosts = netproxy.allowed(env)
    assert {
        ("pypi.org", 443),
        ("files.pythonhosted.org", 443),
        ("registry.npmjs.org", 443),
        ("pypi.internal", 8443),
        ("b.example", 443),
        ("mirror.local", 80),
        ("npm.internal", 443),
        ("git.example.com", 443),
        ("files.internal", 8080),
    } <= hosts
    assert not any(host in ("127.0.0.1", "localhost", "") for host, _ in hosts)


FETCH = """
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=20)
except Exception as exc:
    sys.exit(f"failed: {exc}")
print("fetched")
"""


def test_a_host_that_is_no_index_is_refused_and_the_error_says_so(tmp_path: Path) -> None:
    if sandbox.mode() == "none":
        pytest.skip("no sandbox on this host: provisioning has the host's network")
    res = processes.run(
        [sys.executable, "-c", FETCH, "https://example.com/"],
        cwd=tmp_path,
        sandbox=Policy(network=True),
        timeout=60,
    )
    assert res.returncode != 0 and "403" in res.stderr, res.stderr
    assert "refused example.com:443" in res.stderr and netproxy.HOSTS_ENV in res.stderr


def test_under_a_deep_temporary_directory_the_proxy_still_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Unix socket's path holds at most 107 bytes: a worker whose $TMPDIR is deeper than that
    leaves still makes its provisioning proxy (in /tmp then), and steps reach the index."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    with netproxy.serving({}) as (sock, refused):
        assert sock.is_socket() and len(str(sock)) <= 107
        assert not sock.is_relative_to(deep) and refused == []
