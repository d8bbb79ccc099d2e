"""The SDK as a client of a server it must not trust blindly: no server, a
socket others could have put there, a server of another user, answers that
are too large, malformed or never come. The servers here are real sockets
with hostile answers."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys

import pytest

from conftest import run
from jail_sandbox import SandboxClient, SandboxError, SandboxHandle, SandboxUnavailable
from jail_sandbox import _client, sync


class Hostile:
    """A unix-socket server that answers every request with `answer` (bytes,
    or None to close at once), and records what it was sent."""

    def __init__(self, path, answer):
        self.path = str(path)
        self.answer = answer
        self.requests = []
        self.connections = 0

    async def __aenter__(self):
        self.server = await asyncio.start_unix_server(self._serve, path=self.path)
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            self.requests.append(await reader.readuntil(b"\r\n\r\n"))
            if self.answer is not None:
                writer.write(self.answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def test_no_server_is_unavailable_with_the_socket_and_the_command(tmp_path):
    path = str(tmp_path / "none.sock")
    with pytest.raises(SandboxUnavailable) as e:
        run(SandboxClient(path).list())
    assert path in str(e.value) and "jail serve" in str(e.value)
    assert isinstance(e.value, RuntimeError) and e.value.socket_path == path
    # A socket left by a server that is gone: refused, the same.
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()
    with pytest.raises(SandboxUnavailable, match="jail serve"):
        run(SandboxClient(path).list())
    # Nor a missing directory.
    with pytest.raises(SandboxUnavailable, match="jail serve"):
        run(SandboxClient(str(tmp_path / "no" / "dir.sock")).list())
    # The synchronous client says the same.
    with pytest.raises(SandboxUnavailable, match="jail serve"):
        sync.SandboxClient(path).list()


def test_jail_socket_names_the_server(tmp_path, monkeypatch):
    path = str(tmp_path / "env.sock")
    monkeypatch.setenv("JAIL_SOCKET", path)
    assert SandboxClient().socket_path == path

    async def go():
        async with Hostile(path, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]") as h:
            assert await SandboxClient().list() == []
            return h.requests
    requests = run(go())
    assert requests and requests[0].startswith(b"GET /v1/sandboxes HTTP/1.1\r\n")


@pytest.mark.parametrize("layout", ["socket dir writable by others", "dir above writable by others, not sticky",
                                    "a symbolic link on the way"])
def test_a_socket_others_could_have_placed_is_never_sent_anything(tmp_path, layout):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    path = real / "jail.sock"
    given = str(path)
    if layout == "socket dir writable by others":
        os.chmod(real, 0o777)
        why = "writable by others"
    elif layout == "dir above writable by others, not sticky":
        os.chmod(tmp_path, 0o777)
        why = "writable by others"
    else:
        os.symlink(real, tmp_path / "link")
        given = str(tmp_path / "link" / "jail.sock")
        why = "symbolic link"

    async def go():
        async with Hostile(path, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]") as h:
            with pytest.raises(SandboxUnavailable, match=why):
                await SandboxClient(given).create(_spec())
            return h.connections
    try:
        assert run(go()) == 0
    finally:
        os.chmod(tmp_path, 0o700)


def _spec():
    from jail_sandbox import SandboxSpec
    return SandboxSpec("victim", image=None, secrets=("SDK_TOKEN",))


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files to another user")


@needs_root
@pytest.mark.parametrize("what", ["socket", "directory"])
def test_a_socket_or_directory_of_another_user_is_refused(tmp_path, what):
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    path = d / "jail.sock"

    async def go():
        async with Hostile(path, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]") as h:
            os.chown(path if what == "socket" else d, 65534, 65534)
            with pytest.raises(SandboxUnavailable, match="uid 65534"):
                await SandboxClient(path).list()
            return h.connections
    assert run(go()) == 0


@needs_root
def test_a_server_of_another_user_is_told_nothing(tmp_path):
    # The socket is root's, in root's directory, but the process that
    # listens on it (whose credentials the kernel gives the client) is
    # nobody's: a server this client does not trust.
    path = str(tmp_path / "jail.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    code = (
        "import socket, sys\n"
        f"l = socket.socket(fileno={s.fileno()}); l.listen()\n"
        "print('ready', flush=True)\n"
        "c, _ = l.accept(); got = b''\n"
        "while True:\n"
        "    d = c.recv(65536)\n"
        "    if not d: break\n"
        "    got += d\n"
        "print(repr(got), flush=True)\n"
    )
    child = subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
                              sys.executable, "-c", code], pass_fds=[s.fileno()], stdout=subprocess.PIPE, text=True)
    s.close()
    try:
        assert child.stdout.readline() == "ready\n"
        with pytest.raises(SandboxUnavailable, match="the server runs as uid 65534"):
            # Bounded: a client that sent the request would wait for an
            # answer that never comes.
            run(asyncio.wait_for(SandboxClient(path).create(_spec()), 30))
        assert child.stdout.readline() == "b''\n", "the untrusted server was sent the request"
    finally:
        child.kill()
        child.wait()


def _answer(status="200 OK", headers=(), body=b""):
    head = f"HTTP/1.1 {status}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"
    return head.encode() + body


@pytest.mark.parametrize("answer,error", [
    (_answer(headers=["Content-Length: 100000000000"]), "larger than 1000 bytes"),
    (_answer(headers=["Content-Length: 2000"], body=b"[" + b" " * 1998 + b"]"), "larger than 1000 bytes"),
    (_answer(headers=["Transfer-Encoding: chunked"], body=b"300\r\n" + b" " * 0x300 + b"\r\n300\r\n"), "larger than"),
    (_answer(body=b"[" + b" " * 5000 + b"]"), "larger than 1000 bytes"),  # ends with the connection
    (_answer(headers=[f"X-{i}: y" for i in range(1000)]), "more than 100 header lines"),
    (_answer(headers=["X: " + "y" * 100000]), "longer than"),
    (_answer(headers=["Content-Length: -1"]), "bad Content-Length"),
    (_answer(headers=["Transfer-Encoding: chunked"], body=b"zz\r\n"), "bad chunk size"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not HTTP/1.1"),
    (_answer(headers=["Content-Length: 5"], body=b"nope!"), "not JSON"),
])
def test_bad_answers_are_errors_and_bounded(tmp_path, answer, error):
    path = tmp_path / "jail.sock"

    async def go():
        async with Hostile(path, answer):
            with pytest.raises(SandboxError, match=error):
                await SandboxClient(path, max_response_bytes=1000).list()
    run(go())


def test_chunked_and_error_answers_are_read(tmp_path):
    path = tmp_path / "jail.sock"
    body = b'[{"name":"b"},{"name":"a"}]'
    chunked = _answer(headers=["Transfer-Encoding: chunked"],
                      body=b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:5], body[5:])) + b"0\r\n\r\n")

    async def go():
        async with Hostile(path, chunked):
            assert await SandboxClient(path).list() == ["a", "b"]
        async with Hostile(path, _answer("409 Conflict", ["Content-Length: 40"], b'{"error":"jail: sandbox a: name taken!"}')):
            with pytest.raises(SandboxError) as e:
                await SandboxClient(path).remove("a")
            assert e.value.message == "jail: sandbox a: name taken!" and e.value.status == 409
        async with Hostile(path, _answer("502 Bad Gateway", ["Content-Length: 4"], b"oops")):
            with pytest.raises(SandboxError, match="oops"):
                await SandboxClient(path).remove("a")
    run(go())


def test_a_server_that_goes_away_before_answering_is_unavailable(tmp_path):
    path = tmp_path / "jail.sock"

    async def go():
        async with Hostile(path, None):
            with pytest.raises(SandboxUnavailable, match="went away"):
                await SandboxHandle(SandboxClient(path), "a").exec("true")
        async with Hostile(path, _answer(headers=["Content-Length: 100"], body=b'{"stdout":')):
            with pytest.raises(SandboxUnavailable, match="went away"):
                await SandboxHandle(SandboxClient(path), "a").exec("true")
    run(go())


def test_an_exec_whose_answer_never_comes_times_out(tmp_path, monkeypatch):
    # The server kills a command at its timeout and answers; one that does
    # not answer is given up on a while after (EXEC_TIMEOUT_SLACK_S).
    monkeypatch.setattr(_client, "EXEC_TIMEOUT_SLACK_S", 0.2)
    path = tmp_path / "jail.sock"

    async def silent(reader, writer):
        await reader.read()  # until the client hangs up

    async def go():
        server = await asyncio.start_unix_server(silent, path=str(path))
        try:
            with pytest.raises(SandboxUnavailable, match="no answer to POST /v1/sandboxes/a/exec within"):
                await SandboxHandle(SandboxClient(path), "a").exec("sleep", ["100"], timeout=0.1)
        finally:
            server.close()
            await server.wait_closed()
    run(go())


def test_connect_timeout(tmp_path):
    # A listener that never accepts, its backlog full: connect() waits.
    path = str(tmp_path / "jail.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(0)
    fillers = []
    try:
        while True:
            f = socket.socket(socket.AF_UNIX)
            f.setblocking(False)
            fillers.append(f)
            try:
                f.connect(path)
            except BlockingIOError:
                break
            if len(fillers) > 100:
                pytest.skip("the backlog never fills here")
        with pytest.raises(SandboxUnavailable, match="no server answered within 0.2s"):
            run(SandboxClient(path, connect_timeout=0.2).list())
    finally:
        for f in fillers:
            f.close()
        listener.close()


def test_sync_client_refuses_a_running_loop(tmp_path):
    async def go():
        with pytest.raises(RuntimeError, match="running event loop"):
            sync.SandboxClient(tmp_path / "x.sock").list()
    run(go())
