"""SandboxClient and SandboxHandle: persistent sandboxes through `jail serve`."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets as _random
from typing import Any, Awaitable, Dict, List, Mapping, Optional, Sequence, Union
from urllib.parse import urlencode

from . import _transport
from ._errors import SandboxError, SandboxNotFound
from ._model import DEFAULT_IMAGE, ExecResult, SandboxSpec, check_name

__all__ = ["SandboxClient", "SandboxHandle", "ONE_SHOT_LABEL"]

_log = logging.getLogger("jail_sandbox")

# The label of the sandboxes run_python and run_shell make: its value is a
# token of the call, so that a sandbox is removed only by the call that
# made it (and a leftover one, after a crash, is easy to find).
ONE_SHOT_LABEL = "jail-sandbox/one-shot"

# What an answer may hold at most: a command's result (1 MiB per stream by
# default, up to six times that once escaped in JSON) or a sandbox's logs.
DEFAULT_MAX_RESPONSE_BYTES = 64 << 20

# How long after an exec's own timeout the client still waits for its
# answer: the server kills the command at the timeout and answers at once;
# this is for a server that does not.
EXEC_TIMEOUT_SLACK_S = 60.0

# Code longer than this goes to the interpreter on its stdin rather than
# as an argument (the kernel's bound on one argument is 128 KiB).
_MAX_INLINE_CODE = 64 << 10


def _check_timeout(timeout: Optional[float]) -> Optional[float]:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout: {timeout!r}: a positive number of seconds, or None")
    return float(timeout)


class SandboxClient:
    """An asyncio client of `jail serve` on its unix socket.

    socket_path: the server's socket; None for $JAIL_SOCKET, or the server's
    default (/run/jail/jail.sock for root, $XDG_RUNTIME_DIR/jail/jail.sock
    otherwise). The client talks only to a server of its own user or root
    (see _transport). connect_timeout: seconds to wait for a connection;
    max_response_bytes: the largest answer read. Each request has a
    connection of its own, so one client may serve many tasks at once;
    cancelling a call closes its connection, and the server then cancels
    what it started (an exec's command is killed).
    """

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        *,
        connect_timeout: float = 5.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self._socket_path = os.fspath(socket_path) if socket_path is not None else None
        if not connect_timeout > 0:
            raise ValueError("connect_timeout: a positive number of seconds")
        if max_response_bytes <= 0:
            raise ValueError("max_response_bytes: a positive number")
        self._connect_timeout = float(connect_timeout)
        self._max_response = int(max_response_bytes)

    @property
    def socket_path(self) -> str:
        """The socket this client connects to (raises SandboxUnavailable
        when there is no default)."""
        if self._socket_path is not None:
            return self._socket_path
        return _transport.default_socket_path()

    def __repr__(self) -> str:
        return f"SandboxClient(socket_path={self._socket_path!r})"

    async def __aenter__(self) -> "SandboxClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        # Nothing held between calls.
        return None

    async def _call(self, method: str, path: str, body: Any = None, *, timeout: Optional[float] = None) -> _transport.Response:
        return await _transport.request(
            self.socket_path,
            method,
            path,
            body,
            connect_timeout=self._connect_timeout,
            max_response_bytes=self._max_response,
            timeout=timeout,
        )

    async def health(self) -> Dict[str, Any]:
        """The server's health answer ({"status": "ok", ...})."""
        return (await self._call("GET", "/v1/health")).json("GET /v1/health")

    async def create(self, spec: SandboxSpec, *, reuse: bool = False) -> "SandboxHandle":
        """Creates the sandbox spec describes and returns it once it is
        ready for commands. A name taken, or a spec jail refuses, is a
        SandboxError with jail's message. With reuse, a sandbox of that
        name made from the same spec is returned as it is (its files
        kept), and one made from another spec is removed and made anew."""
        if not isinstance(spec, SandboxSpec):
            raise TypeError("create: a SandboxSpec")
        body = spec.to_api()
        if reuse:
            body["reuse"] = True
        await self._call("POST", "/v1/sandboxes", body)
        return SandboxHandle(self, spec.name)

    async def get(self, name: str) -> "SandboxHandle":
        """The sandbox name; SandboxNotFound when there is none."""
        await self._info(name)
        return SandboxHandle(self, name)

    async def _info(self, name: str) -> Dict[str, Any]:
        path = "/v1/sandboxes/" + check_name(name)
        info = (await self._call("GET", path)).json("GET " + path)
        if not isinstance(info, dict):
            raise SandboxError(f"jail: answer of GET {path}: not a JSON object")
        return info

    async def list(self, *, labels: Optional[Mapping[str, str]] = None) -> List[str]:
        """The names of this user's sandboxes (those carrying every label
        of labels, when given), sorted."""
        path = "/v1/sandboxes"
        if labels:
            path += "?" + urlencode([("label", f"{k}={v}") for k, v in labels.items()])
        infos = (await self._call("GET", path)).json("GET /v1/sandboxes")
        if not isinstance(infos, list):
            raise SandboxError("jail: answer of GET /v1/sandboxes: not a JSON list")
        names = [i.get("name") for i in infos if isinstance(i, dict)]
        return sorted(n for n in names if isinstance(n, str))

    async def remove(self, name: str, *, force: bool = True) -> None:
        """Removes the sandbox name, killing what runs in it (without
        force, a running sandbox is refused: stop it first).
        SandboxNotFound when there is none."""
        path = "/v1/sandboxes/" + check_name(name)
        if force:
            path += "?force=1"
        await self._call("DELETE", path)

    async def _exec(
        self,
        name: str,
        cmd: Union[str, Sequence[str]],
        args: Optional[Sequence[str]],
        timeout: Optional[float],
        stdin: Optional[str] = None,
    ) -> ExecResult:
        if not isinstance(cmd, str):
            if args is not None:
                raise TypeError("exec: a command as a string with args, or one sequence [cmd, *args]")
            argv = list(cmd)
            if not argv:
                raise ValueError("exec: an empty command")
            cmd, args = argv[0], argv[1:]
        args = [] if args is None else list(args)
        if isinstance(args, str) or not all(isinstance(a, str) for a in args) or not isinstance(cmd, str):
            raise TypeError("exec: the command and its arguments are strings")
        timeout = _check_timeout(timeout)
        body: Dict[str, Any] = {"cmd": cmd}
        if args:
            body["args"] = args
        if timeout is not None:
            body["timeout_s"] = timeout
        if stdin:
            body["stdin"] = stdin
        path = f"/v1/sandboxes/{check_name(name)}/exec"
        wait = None if timeout is None else timeout + EXEC_TIMEOUT_SLACK_S
        resp = await self._call("POST", path, body, timeout=wait)
        return ExecResult.from_api(resp.json("POST " + path))

    async def run_python(
        self, code: str, *, image: Optional[str] = DEFAULT_IMAGE, timeout: Optional[float] = None, **spec_fields: Any
    ) -> ExecResult:
        """Runs Python code in a sandbox of its own, made from image and
        spec_fields (the other fields of SandboxSpec), and removes the
        sandbox, whatever happens (an error, a cancellation). timeout ends
        the code after that many seconds (exit 124, timed_out)."""
        if not isinstance(code, str):
            raise TypeError("run_python: code is a string")
        if len(code) > _MAX_INLINE_CODE:
            return await self._one_shot(["python3", "-"], code, image, timeout, spec_fields)
        return await self._one_shot(["python3", "-c", code], None, image, timeout, spec_fields)

    async def run_shell(
        self, script: str, *, image: Optional[str] = DEFAULT_IMAGE, timeout: Optional[float] = None, **spec_fields: Any
    ) -> ExecResult:
        """Runs a /bin/sh script as run_python runs code."""
        if not isinstance(script, str):
            raise TypeError("run_shell: script is a string")
        if len(script) > _MAX_INLINE_CODE:
            return await self._one_shot(["/bin/sh", "-s"], script, image, timeout, spec_fields)
        return await self._one_shot(["/bin/sh", "-c", script], None, image, timeout, spec_fields)

    async def _one_shot(
        self,
        argv: List[str],
        stdin: Optional[str],
        image: Optional[str],
        timeout: Optional[float],
        spec_fields: Dict[str, Any],
    ) -> ExecResult:
        fields = dict(spec_fields)
        token = _random.token_hex(8)
        name = fields.pop("name", None) or f"oneshot-{token}"
        labels = dict(fields.pop("labels", None) or {})
        labels[ONE_SHOT_LABEL] = token
        spec = SandboxSpec(name=name, image=image, labels=labels, **fields)
        body = spec.to_api()  # refused here, before anything exists
        _check_timeout(timeout)
        # The create is not cut short by a cancellation (which waits for
        # it): its outcome says whether there is a sandbox to remove. made
        # is None when that is not known (the server went away meanwhile).
        made: Optional[bool] = None
        create = asyncio.ensure_future(self._call("POST", "/v1/sandboxes", body))
        try:
            try:
                await _finish(create)
            finally:
                if create.done() and not create.cancelled():
                    err = create.exception()
                    made = True if err is None else False if isinstance(err, SandboxError) else None
            result = await self._exec(name, argv[0], argv[1:], timeout, stdin)
        except BaseException:
            if made is not False:
                try:
                    await _finish(self._remove_one_shot(name, token, made))
                except Exception as cleanup:
                    _log.warning("jail_sandbox: one-shot sandbox %s not removed: %s", name, cleanup)
            raise
        await _finish(self._remove_one_shot(name, token, made))
        return result

    async def _remove_one_shot(self, name: str, token: str, made: Optional[bool]) -> None:
        """Removes the one-shot sandbox name; when it is not known to have
        been made, only if it carries this call's token (a name the caller
        gave may be another sandbox's)."""
        try:
            if not made:
                info = await self._info(name)
                if (info.get("labels") or {}).get(ONE_SHOT_LABEL) != token:
                    return
            await self.remove(name, force=True)
        except SandboxNotFound:
            pass


async def _finish(aw: Awaitable[None]) -> None:
    """Awaits aw to its end even when the caller is cancelled meanwhile (the
    cancellation is raised once it is done): a one-shot sandbox's removal
    is not cut short by the cancellation of the run it ends."""
    task = asyncio.ensure_future(aw)
    cancelled = False
    while True:
        try:
            await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError()


class SandboxHandle:
    """A persistent sandbox, by name. Its methods ask the server each time;
    the handle holds nothing else."""

    def __init__(self, client: SandboxClient, name: str) -> None:
        self._client = client
        self._name = check_name(name)

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"SandboxHandle(name={self._name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SandboxHandle) and other._client is self._client and other._name == self._name

    def __hash__(self) -> int:
        return hash(self._name)

    async def exec(
        self, cmd: Union[str, Sequence[str]], args: Optional[Sequence[str]] = None, *, timeout: Optional[float] = None
    ) -> ExecResult:
        """Runs cmd with args in the sandbox (starting it if stopped) and
        returns how it ended; cmd may also be a sequence [cmd, *args].
        timeout: seconds after which the command is killed (exit 124,
        timed_out)."""
        return await self._client._exec(self._name, cmd, args, timeout)

    async def shell(self, script: str, *, timeout: Optional[float] = None) -> ExecResult:
        """Runs script with /bin/sh -c."""
        if not isinstance(script, str):
            raise TypeError("shell: script is a string")
        return await self._client._exec(self._name, "/bin/sh", ["-c", script], timeout)

    async def stop(self) -> None:
        """SIGTERM to every process in the sandbox, SIGKILL after the
        server's grace period (10 s); returns once they have ended. Its
        files are kept, and the next exec starts it again."""
        await self._client._call("POST", f"/v1/sandboxes/{self._name}/stop")

    async def kill(self) -> None:
        """SIGKILL to every process in the sandbox at once; its files are
        kept."""
        await self._client._call("POST", f"/v1/sandboxes/{self._name}/kill")

    async def logs(self, *, tail: Optional[int] = None) -> str:
        """The combined output of the sandbox's execs, its last tail lines
        (None: all that the server keeps, about the last MiB)."""
        path = f"/v1/sandboxes/{self._name}/logs"
        if tail is not None:
            if isinstance(tail, bool) or not isinstance(tail, int) or tail < 0:
                raise ValueError(f"logs: tail {tail!r}: a number of lines, 0 or more")
            if tail == 0:  # the server's tail=0 is all of it
                await self.info()
                return ""
            path += f"?tail={tail}"
        resp = await self._client._call("GET", path)
        return resp.body.decode("utf-8", "replace")

    async def info(self) -> Dict[str, Any]:
        """What the server says of the sandbox (state, image, labels,
        created, last exec, CPU and peak memory so far)."""
        return await self._client._info(self._name)
