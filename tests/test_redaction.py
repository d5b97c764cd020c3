"""Reports never echo secrets (docs/security.md): what the worker knows, what looks like one."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import BRANCH, Repo, calc_base

from verify_dag import processes, redaction
from verify_dag.cli import main

_RNG = random.Random(11)
# A private key's body: base64 lines as ssh-keygen writes them (70 characters each).
_KEY_BODY = base64.b64encode(bytes(_RNG.randrange(256) for _ in range(260))).decode()
KEY_LINES = [_KEY_BODY[i : i + 70] for i in range(0, len(_KEY_BODY), 70)]
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(KEY_LINES)
    + "\n-----END OPENSSH PRIVATE KEY-----\n"
)
NETRC_PW = "netrc-canary-7f3a9c"
GIT_CRED_PW = "gitcred-canary-55e1d0"
CONFIG_KEY = "cfg-canary-91b2c7d4"
PYPI_PW = "pypirc-canary-0c4e2f"
AWS_SECRET = "awscred-canary-Zx81Kq/u3Wn+Rt5"
ENV_SECRET = "envtoken-canary-a6b7c8d9"
# Full lines only: the last one may be shorter than MIN_LEN, and a printed block as a whole goes
# by its shape anyway.
CANARIES = [NETRC_PW, GIT_CRED_PW, CONFIG_KEY, PYPI_PW, AWS_SECRET, ENV_SECRET, *KEY_LINES[:-1]]


def worker_home(home: Path) -> None:
    """The credential files a worker host has in HOME, each holding a canary."""
    files = {
        ".ssh/id_ed25519": PRIVATE_KEY,
        ".ssh/id_ed25519.pub": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA worker@host\n",
        ".netrc": f"machine git.example.com\n  login deploy\n  password {NETRC_PW}\n",
        ".git-credentials": f"https://deploy:{GIT_CRED_PW}@git.example.com\n",
        ".config/verify-dag/config.toml": (
            f'command = ["llm-cli", "--api-key", "{CONFIG_KEY}", "{{prompt}}"]\n'
        ),
        ".pypirc": f"[pypi]\nusername = __token__\npassword = {PYPI_PW}\n",
        ".aws/credentials": f"[default]\naws_access_key_id = AKIAZZZZEXAMPLE00000\n"
        f"aws_secret_access_key = {AWS_SECRET}\n",
    }
    for rel, text in files.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # conftest points HOME at tmp_path/home; the config must be looked up there too.
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("VERIFY_DAG_CONFIG", raising=False)
    monkeypatch.setenv("DEPLOY_TOKEN", ENV_SECRET)
    home = tmp_path / "home"
    worker_home(home)
    return home


def test_credential_files_in_home_never_survive(home: Path) -> None:
    printed = "\n".join(
        [
            f"netrc says {NETRC_PW}",
            f"git: {GIT_CRED_PW}!",
            f"key={CONFIG_KEY}",
            f"pypi {PYPI_PW}",
            f"aws '{AWS_SECRET}'",
            f"env {ENV_SECRET}",
            # A key printed line by line without its header, and as a repr.
            *KEY_LINES[1:3],
            repr("\n".join(KEY_LINES)),
        ]
    )
    out = redaction.redact(printed)
    assert [c for c in CANARIES if c in out] == []
    assert "netrc says [REDACTED]" in out


def test_a_credential_file_written_later_is_known_at_once(home: Path) -> None:
    assert redaction.redact("nothing secret here") == "nothing secret here"
    (home / ".netrc").write_text("machine h login u password later-canary-9911\n")
    assert redaction.redact("later-canary-9911") == "[REDACTED]"


def test_the_broker_password_alone_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFY_DAG_BROKER_URL", "redis://:canarypw@broker.internal/0")
    assert processes.redact("AUTH canarypw: WRONGPASS") == "AUTH [REDACTED]: WRONGPASS"


def test_the_celery_apps_backend_credentials_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from verify_dag.tasks import app as celery_app

    monkeypatch.setitem(
        celery_app.app.conf, "result_backend", "redis://worker:backend-canary-33@results.internal/1"
    )
    assert "backend-canary-33" not in processes.redact("password backend-canary-33 rejected")


def test_an_environment_secret_is_redacted_in_its_encodings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "s3cr3t/value+with=chars&more"
    monkeypatch.setenv("SERVICE_API_KEY", secret)
    encoded = [
        base64.b64encode(secret.encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode(),
        # Inside a longer base64 text, at each of the three offsets.
        base64.b64encode(b"Basic user:" + secret.encode()).decode(),
        base64.b64encode(b"ab" + secret.encode() + b"\n").decode(),
        base64.b64encode(b"x" + secret.encode() + b"!").decode(),
        quote(secret, safe=""),
    ]
    out = processes.redact("\n".join(encoded))
    for text in encoded:
        assert text not in out
    core = base64.b64encode(secret.encode()).decode()[:16]
    assert core not in out


def test_secret_shapes_are_redacted_whoever_they_belong_to() -> None:
    github = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    aws = "AKIAIOSFODNN7EXAMPLE"
    slack = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"
    stripe = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    payload = base64.urlsafe_b64encode(b'{"sub":"1234567890"}').decode().rstrip("=")
    jwt = f"{header}.{payload}.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    pem = (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
        "4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0\n-----END RSA PRIVATE KEY-----"
    )
    text = (
        f"token={github}\nkey id {aws} in use\nslack: {slack}\nstripe {stripe}\n"
        f"Authorization: Bearer {jwt}\nclone https://bob:hunter2x@git.example.org/r.git\n"
        f"{pem}\nafter the key\n"
    )
    out = redaction.redact(text)
    for secret in (
        github,
        aws,
        slack,
        stripe,
        jwt,
        jwt.rsplit(".", 1)[1],
        "hunter2x",
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo",
        "BEGIN RSA PRIVATE KEY",
    ):
        assert secret not in out, secret
    assert "https://bob:[REDACTED]@git.example.org/r.git" in out
    assert out.endswith("[REDACTED]\nafter the key\n")


def test_a_key_cut_short_by_the_output_cap_goes_too() -> None:
    out = redaction.redact("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIE")
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in out


def ordinary_output() -> str:
    sha = hashlib.sha1(b"commit").hexdigest()
    digest = hashlib.sha256(b"wheel").hexdigest()
    return (
        "\n".join(
            [
                "============================= test session starts ==============================",
                "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0",
                f"HEAD is now at {sha} calc: mul",
                f"{sha[:12]} (base) and {sha}",
                f"calc-0.1-py3-none-any.whl sha256={digest} sha256:{digest}",
                f"run id {uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)}",
                "tests/test_calc.py::test_add PASSED                                      [ 50%]",
                "tests/test_calc.py::test_mul FAILED                                      [100%]",
                "E       assert 13 == 12",
                "E        +  where 13 = mul(3, 4)",
                "src/calc.py:10: AssertionError",
                "token = tokenize(source)  # password_field=None, api_key_name='x'",
                "docs at https://docs.example.org/en/latest/ and ssh://git@github.com/o/r.git",
                "FAILED tests/test_calc.py::test_mul - assert 13 == 12",
                "========================= 1 failed, 1 passed in 0.05s ==========================",
            ]
        )
        + "\n"
    )


def test_shas_digests_uuids_and_ordinary_output_are_untouched() -> None:
    text = ordinary_output()
    assert redaction.redact(text) == text


_LOADED = (
    "import sys\n"
    "from verify_dag import redaction\n"
    "{setup}"
    "print(repr(redaction.redact({text!r})))\n"
    "print('detect_secrets' in sys.modules, 'requests' in sys.modules)\n"
)


def _redacted_in_a_new_process(text: str, setup: str = "") -> tuple[str, str]:
    """``text`` redacted by a process of its own, and whether detect-secrets (and the requests
    it imports) got loaded there."""
    proc = subprocess.run(
        [sys.executable, "-c", _LOADED.format(setup=setup, text=text)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out, loaded = proc.stdout.strip().splitlines()
    return out, loaded


def test_detect_secrets_is_imported_only_for_text_a_gate_finds() -> None:
    """Its import (requests and every plugin) costs every process that redacts 0.2 s; text no
    detector's gate finds needs none of it, and text a gate finds is still masked by it."""
    plain = "tests/test_calc.py::test_add PASSED in 0.01s"
    assert _redacted_in_a_new_process(plain) == (repr(plain), "False False")
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    out, loaded = _redacted_in_a_new_process(f"pushed with {token}")
    assert (out, loaded) == (repr("pushed with [REDACTED]"), "True True")


def test_under_a_detect_secrets_release_not_known_here_every_detector_runs() -> None:
    """A later release may add a detector without a gate here: then detect-secrets is loaded at
    the first redaction, whatever the text, so that detector scans it."""
    plain = "nothing a gate knows"
    unknown = "redaction._GATED_RELEASES = ()\n"
    assert _redacted_in_a_new_process(plain, unknown) == (repr(plain), "True True")


def test_a_megabyte_of_test_output_is_redacted_quickly(home: Path) -> None:
    chunk = ordinary_output()
    text = (chunk * (1_000_000 // len(chunk)))[:999_000] + f"\nE   leaked {NETRC_PW}\n"
    redaction.redact(text)  # collects the known secrets once
    start = time.perf_counter()
    out = redaction.redact(text)
    elapsed = time.perf_counter() - start
    assert NETRC_PW not in out and out.count("[REDACTED]") == 1
    # About 40 ms on an idle core; the bound only catches a return to per-line or
    # per-secret scanning (seconds) on a shared, loaded machine.
    assert elapsed < 1.0, elapsed


HOSTILE_TEST = """\
import json
from pathlib import Path


def test_leak():
    # Sandboxed or not, the suite knows the values: they are in its own repository.
    canaries = json.loads(Path(__file__).with_name("canaries.json").read_text())
    key = Path(__file__).with_name("stolen_key.pem").read_text()
    print(key)
    for line in key.splitlines():
        print("line:", line)
    print("\\n".join(canaries))
    assert canaries == [], "\\n".join(canaries) + "\\n" + key
"""


def test_canaries_never_reach_a_stored_report(repo: Repo, home: Path, tmp_path: Path) -> None:
    calc_base(repo)
    repo.git("checkout", "-q", "-b", "leak")
    repo.write("tests/canaries.json", json.dumps(CANARIES))
    repo.write("tests/stolen_key.pem", PRIVATE_KEY)
    repo.write("tests/test_leak.py", HOSTILE_TEST)
    repo.commit("tests: leak")
    out = tmp_path / "report.json"
    main(["verify", str(repo.path), *BRANCH, "--format=json", f"--output={out}"])
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert "test_leak" in json.dumps(doc) and "[REDACTED]" in json.dumps(doc)
    stored = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert {p.name for p in stored} >= {"report.json", "report.md"}
    for path in [out, *stored]:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert [c for c in CANARIES if c in text] == [], path


def test_paths_in_infrastructure_variables_are_not_mistaken_for_secrets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """GITHUB_WORKSPACE, VERIFY_DAG_STORE: kept from repository code, but every report names
    them; a report full of [REDACTED] paths would be a report nobody can read."""
    workspace = str(tmp_path / "runner" / "work" / "project")
    monkeypatch.setenv("GITHUB_WORKSPACE", workspace)
    monkeypatch.setenv("VERIFY_DAG_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_canaryTokenValue0123456789")
    text = f"{workspace}/tests/test_x.py:3: AssertionError (token ghs_canaryTokenValue0123456789)"
    assert processes.redact(text) == (
        f"{workspace}/tests/test_x.py:3: AssertionError (token [REDACTED])"
    )


def test_a_withheld_token_is_masked_but_a_withheld_sentence_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every withheld value that could be a secret is masked, whatever its name (DB_PASS is no
    known credential name); one with whitespace is prose or a command line, not a credential,
    and a report that masked it would lose ordinary text."""
    monkeypatch.setenv("DB_PASS", "hunter2-canary-Q7")
    monkeypatch.setenv("EXPECTED_REPLY", "the error is a bare KeyError")
    text = "login hunter2-canary-Q7 failed: the error is a bare KeyError"
    assert processes.redact(text) == "login [REDACTED] failed: the error is a bare KeyError"
