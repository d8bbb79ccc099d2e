"""Fixtures of the SDK's tests: a real `jail serve`, started by the tests as
the user that runs them (root, or an unprivileged user: the Go test
test/sdk_python_test.go runs this suite both ways), with a state directory
and an audit log of its own under pytest's temporary directory.

JAIL_TEST_BIN names the jail binary (default: bin/jail of the repository).
Every test that uses a server must leave no sandbox: the `client` fixture
fails it otherwise (and removes what was left, so that the next test
starts clean); the server is stopped, and its socket gone, when the module
ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jail_sandbox import SandboxClient, SandboxUnavailable  # noqa: E402
from jail_sandbox import sync  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
SECRET_VALUE = "s3cr3t-value-of-the-sdk-tests-0f9e"


def jail_bin() -> str:
    path = os.environ.get("JAIL_TEST_BIN") or str(REPO / "bin" / "jail")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no jail binary at {path}: run make build, or set JAIL_TEST_BIN")
    return path


class Server:
    """A `jail serve` on a socket in dir."""

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        self.socket = str(dir / "run" / "jail.sock")
        self.state = str(dir / "state")
        self.audit = str(dir / "audit" / "audit.log")
        self.proc: "subprocess.Popen[bytes] | None" = None

    def start(self) -> "Server":
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/"),
            "JAIL_STATE_DIR": self.state,
            "JAIL_AUDIT_LOG": self.audit,
            # A secret the server knows; the tests never send its value.
            "JAIL_SECRET_SDK_TOKEN": SECRET_VALUE,
        }
        if "TMPDIR" in os.environ:
            env["TMPDIR"] = os.environ["TMPDIR"]
        self.proc = subprocess.Popen(
            [jail_bin(), "serve", "--socket", self.socket, "--pool", "0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Until it answers (a guard against a hang, not a timing check).
        # In a thread of its own: a test may start it from a coroutine.
        deadline = time.monotonic() + 30
        with concurrent.futures.ThreadPoolExecutor(1) as thread:
            while True:
                try:
                    thread.submit(asyncio.run, SandboxClient(self.socket).health()).result()
                    return self
                except SandboxUnavailable:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"jail serve on {self.socket} does not answer")
                    time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("jail serve did not stop within a minute of SIGTERM")

    def remove_all(self) -> list:
        """Removes every sandbox there is, and returns their names."""
        with sync.SandboxClient(self.socket) as c:
            names = c.list()
            for n in names:
                c.remove(n)
        return names


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve")).start()
    try:
        yield s
    finally:
        try:
            s.remove_all()
        finally:
            s.stop()
    assert not os.path.exists(s.socket), "jail serve left its socket"


@pytest.fixture
def fresh_server(tmp_path):
    """A server of the test's own, which the test may kill."""
    s = Server(tmp_path).start()
    try:
        yield s
    finally:
        if s.proc is not None and s.proc.poll() is not None:
            s.start()  # killed by the test: the sandboxes live on
        try:
            s.remove_all()
        finally:
            s.stop()


def _no_sandbox_left(s: Server) -> None:
    left = s.remove_all()
    assert left == [], f"sandboxes left behind: {left}"


@pytest.fixture
def client(server):
    """An async SandboxClient of the module's server; the test fails if it
    leaves a sandbox."""
    yield SandboxClient(server.socket)
    _no_sandbox_left(server)


@pytest.fixture
def sync_client(server):
    with sync.SandboxClient(server.socket) as c:
        yield c
    _no_sandbox_left(server)


def run(coro):
    """Runs a coroutine to its end (pytest-asyncio is not a dependency)."""
    return asyncio.run(coro)
