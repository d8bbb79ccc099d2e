"""HTTP/1.1 to `jail serve` over its unix socket, with the standard library
only.

Every request opens a connection of its own (``Connection: close``): there
is no pool to share between tasks or event loops, and a request that is
cancelled closes its connection, which the server takes as the client going
away and so cancels what the request started (an exec's command is killed).

What is sent can be private (code, environment), and what comes back is
believed, so the server is trusted only as `jail`'s Go client trusts it: the
socket's directory and every directory above it are opened one component at
a time without following symbolic links and must belong to root or to the
users trusted (this user, and root), with no directory writable by others
unless it is sticky (as /tmp); the socket must belong to a trusted user; it
is connected to through the directory's descriptor (/proc/self/fd/N/NAME),
never by its path again; and the process that answers must run as a trusted
user (SO_PEERCRED). Every answer is bounded: its headers, and its body by
``max_response_bytes``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import struct
from typing import Any, Iterable, Optional, Tuple

from ._errors import SandboxError, SandboxNotFound, SandboxUnavailable

# How a server is started, named in SandboxUnavailable's messages.
START_HINT = "start one with `jail serve` (or `jail serve --socket PATH` and JAIL_SOCKET=PATH)"

# Bounds on an answer's head: a status line and a few short headers.
MAX_HEADER_LINE = 8 << 10
MAX_HEADER_LINES = 100


def default_socket_path() -> str:
    """The socket `jail serve` listens on by default: $JAIL_SOCKET when set,
    otherwise /run/jail/jail.sock for root and $XDG_RUNTIME_DIR/jail/jail.sock
    for anyone else (as the server's --socket default). Raises
    SandboxUnavailable when there is none (no XDG_RUNTIME_DIR)."""
    env = os.environ.get("JAIL_SOCKET", "")
    if env:
        return env
    if os.geteuid() == 0:
        return "/run/jail/jail.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if not runtime or not os.path.isabs(runtime):
        raise SandboxUnavailable(
            "jail: no socket to reach jail serve at: XDG_RUNTIME_DIR is not set; "
            "set JAIL_SOCKET=PATH (or pass socket_path) to the socket of `jail serve --socket PATH`"
        )
    return os.path.join(runtime, "jail", "jail.sock")


def _refuse(path: str, why: str) -> SandboxUnavailable:
    return SandboxUnavailable(f"jail: server socket {path}: {why}", path)


def _who(uids: Iterable[int]) -> str:
    names = sorted({"root" if u == 0 else f"uid {u}" for u in uids})
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _check_dir(fd: int, path: str, socket_path: str, owners: Tuple[int, ...], last: bool) -> None:
    st = os.fstat(fd)
    allowed = owners if last else (0,) + owners
    if st.st_uid not in allowed:
        raise _refuse(socket_path, f"socket directory {path} belongs to uid {st.st_uid}, not to {_who(allowed)}")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022 and (last or not mode & stat.S_ISVTX):
        raise _refuse(socket_path, f"socket directory {path} is writable by others (mode {mode:04o})")


def _open_socket_dir(socket_path: str, owners: Tuple[int, ...]) -> Tuple[int, str]:
    """Opens the directory of socket_path checked as the module says, and
    returns its descriptor (O_PATH) and the socket's name in it."""
    path = os.path.abspath(socket_path)
    dir_path, name = os.path.split(path)
    if not name:
        raise _refuse(socket_path, "not a socket's path")
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    fd = os.open("/", flags)
    walked = "/"
    try:
        for component in [c for c in dir_path.split("/") if c]:
            # What is above is checked before what is below is trusted.
            _check_dir(fd, walked, socket_path, owners, last=False)
            walked = os.path.join(walked, component)
            try:
                child = os.open(component, flags | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                raise _refuse(socket_path, f"no server answers: {walked} does not exist; {START_HINT}") from None
            except OSError as e:
                why = e.strerror
                if os.path.islink(walked):
                    why = "a symbolic link: give the path it leads to, if its owner is to be trusted"
                raise _refuse(socket_path, f"socket directory {walked}: {why}") from None
            os.close(fd)
            fd = child
        _check_dir(fd, dir_path, socket_path, owners, last=True)
    except BaseException:
        os.close(fd)
        raise
    return fd, name


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


async def connect(socket_path: str, timeout: float) -> socket.socket:
    """Connects to the server at socket_path, checked as the module says,
    within timeout seconds; raises SandboxUnavailable otherwise."""
    owners = tuple(sorted({0, os.geteuid()}))
    if not hasattr(os, "O_PATH"):  # not Linux: jail serve runs only there
        target, dir_fd = socket_path, -1
    else:
        dir_fd, name = _open_socket_dir(socket_path, owners)
        target = f"/proc/self/fd/{dir_fd}/{name}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        if dir_fd >= 0:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise _refuse(socket_path, f"no server answers: the socket does not exist; {START_HINT}") from None
            if not stat.S_ISSOCK(st.st_mode):
                raise _refuse(socket_path, "not a socket")
            if st.st_uid not in owners:
                raise _refuse(socket_path, f"belongs to uid {st.st_uid}, whom this client does not trust")
        sock.setblocking(False)
        await _connect_unix(sock, target, socket_path, timeout)
        # The checks above stand for the socket's path; the peer's
        # credentials, which the kernel took when the server listened,
        # for the server itself.
        uid = _peer_uid(sock)
        if uid not in owners:
            raise _refuse(socket_path, f"the server runs as uid {uid}, whom this client does not trust")
        return sock
    except BaseException:
        sock.close()
        raise
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)


async def _connect_unix(sock: socket.socket, target: str, socket_path: str, timeout: float) -> None:
    """Connects sock to target within timeout seconds. A unix socket's
    connect() does not complete later as a TCP one does: EAGAIN says the
    server's backlog is full, and only trying again tells when there is
    room (the event loop's sock_connect would take the socket for
    connected)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.002
    while True:
        try:
            sock.connect(target)
            return
        except (BlockingIOError, InterruptedError):
            if loop.time() >= deadline:
                raise _refuse(socket_path, f"no server answered within {timeout:g}s; {START_HINT}") from None
            await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
            delay = min(delay * 2, 0.1)
        except (FileNotFoundError, ConnectionRefusedError):
            raise _refuse(socket_path, f"no server answers; {START_HINT}") from None
        except OSError as e:
            raise _refuse(socket_path, f"connect: {e.strerror or e}; {START_HINT}") from None


class Response:
    """An answer: its status, headers (lowercase names) and body."""

    def __init__(self, status: int, headers: dict, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self, what: str) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise SandboxError(f"jail: answer of {what}: not JSON: {e}", self.status) from None


async def request(
    socket_path: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    connect_timeout: float,
    max_response_bytes: int,
    timeout: Optional[float] = None,
) -> Response:
    """Sends one request, with body as JSON unless None, and returns the
    answer when its status is 2xx. A 4xx or 5xx is raised as SandboxError
    (SandboxNotFound for 404) with the server's message; no answer, or one
    cut short, as SandboxUnavailable. timeout bounds the whole exchange."""
    what = f"{method} {path.split('?', 1)[0]}"
    coro = _exchange(socket_path, method, path, body, what, connect_timeout, max_response_bytes)
    if timeout is None:
        resp = await coro
    else:
        try:
            resp = await asyncio.wait_for(coro, timeout)
        except asyncio.TimeoutError:
            raise SandboxUnavailable(
                f"jail: server socket {socket_path}: no answer to {what} within {timeout:g}s", socket_path
            ) from None
    if 200 <= resp.status <= 299:
        return resp
    message = ""
    try:
        message = json.loads(resp.body.decode("utf-8")).get("error", "")
    except (UnicodeDecodeError, ValueError, AttributeError):
        pass
    if not isinstance(message, str) or not message:
        message = resp.body.decode("utf-8", "replace").strip()[:1000] or f"jail: {what}: HTTP {resp.status}"
    cls = SandboxNotFound if resp.status == 404 else SandboxError
    raise cls(message, resp.status)


async def _exchange(
    socket_path: str, method: str, path: str, body: Any, what: str, connect_timeout: float, limit: int
) -> Response:
    data = b"" if body is None else json.dumps(body).encode("utf-8")
    head = [f"{method} {path} HTTP/1.1", "Host: jail", "Connection: close", "Accept: application/json"]
    if body is not None:
        head.append("Content-Type: application/json")
    if body is not None or method in ("POST", "PUT"):
        head.append(f"Content-Length: {len(data)}")
    sock = await connect(socket_path, connect_timeout)
    try:
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_HEADER_LINE)
    except BaseException:
        sock.close()
        raise
    try:
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
            await writer.drain()
            return await _read_response(reader, method, what, limit)
        except (ConnectionError, asyncio.IncompleteReadError, BrokenPipeError) as e:
            raise SandboxUnavailable(
                f"jail: server socket {socket_path}: the server went away during {what} ({type(e).__name__}); {START_HINT}",
                socket_path,
            ) from None
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (OSError, asyncio.CancelledError):
            pass


async def _readline(reader: asyncio.StreamReader, what: str) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise SandboxError(f"jail: answer of {what}: a line longer than {MAX_HEADER_LINE} bytes") from None
    return line.rstrip(b"\r\n")


async def _read_response(reader: asyncio.StreamReader, method: str, what: str, limit: int) -> Response:
    status_line = (await _readline(reader, what)).decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise SandboxError(f"jail: answer of {what}: not HTTP/1.1: {status_line[:80]!r}")
    status = int(parts[1])
    headers: dict = {}
    for _ in range(MAX_HEADER_LINES + 1):
        line = (await _readline(reader, what)).decode("latin-1")
        if not line:
            break
        name, sep, value = line.partition(":")
        if not sep:
            raise SandboxError(f"jail: answer of {what}: a bad header line {line[:80]!r}", status)
        headers[name.strip().lower()] = value.strip()
    else:
        raise SandboxError(f"jail: answer of {what}: more than {MAX_HEADER_LINES} header lines", status)

    def too_large() -> SandboxError:
        return SandboxError(f"jail: answer of {what}: larger than {limit} bytes (max_response_bytes)", status)

    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return Response(status, headers, b"")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        size = 0
        while True:
            size_line = (await _readline(reader, what)).decode("latin-1").split(";", 1)[0].strip()
            try:
                n = int(size_line, 16)
            except ValueError:
                raise SandboxError(f"jail: answer of {what}: a bad chunk size {size_line[:20]!r}", status) from None
            if n < 0:
                raise SandboxError(f"jail: answer of {what}: a bad chunk size", status)
            if n == 0:
                # Trailers, up to the empty line.
                for _ in range(MAX_HEADER_LINES + 1):
                    if not await _readline(reader, what):
                        break
                break
            size += n
            if size > limit:
                raise too_large()
            chunks.append(await reader.readexactly(n))
            await _readline(reader, what)  # the CRLF after the data
        return Response(status, headers, b"".join(chunks))
    if "content-length" in headers:
        try:
            n = int(headers["content-length"])
        except ValueError:
            raise SandboxError(f"jail: answer of {what}: a bad Content-Length", status) from None
        if n < 0:
            raise SandboxError(f"jail: answer of {what}: a bad Content-Length", status)
        if n > limit:
            raise too_large()
        return Response(status, headers, await reader.readexactly(n))
    # Neither: the body ends with the connection.
    body = await reader.read(limit + 1)
    while len(body) <= limit:
        more = await reader.read(limit + 1 - len(body))
        if not more:
            break
        body += more
    if len(body) > limit:
        raise too_large()
    return Response(status, headers, body)
