"""A synchronous SandboxClient for scripts: the same methods, each run to
its end on an event loop of the client's own.

    from jail_sandbox.sync import SandboxClient
    with SandboxClient() as jail:
        print(jail.run_python("print(6 * 7)", image=None).stdout)

A client and its handles are for one thread, and not for code already
inside a running event loop (use jail_sandbox.SandboxClient there). An
interruption (Ctrl-C) cancels the call as a cancelled task would be, so a
one-shot sandbox is still removed before it propagates.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Awaitable, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

from . import _client
from ._model import DEFAULT_IMAGE, ExecResult, SandboxSpec

__all__ = ["SandboxClient", "SandboxHandle"]

T = TypeVar("T")


class SandboxClient:
    """jail_sandbox.SandboxClient, synchronous. close() (or a with block)
    ends its event loop."""

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        *,
        connect_timeout: float = 5.0,
        max_response_bytes: int = _client.DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self._async = _client.SandboxClient(
            socket_path, connect_timeout=connect_timeout, max_response_bytes=max_response_bytes
        )
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    @property
    def socket_path(self) -> str:
        return self._async.socket_path

    def __repr__(self) -> str:
        return f"jail_sandbox.sync.{self._async!r}"

    def __enter__(self) -> "SandboxClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends the client's event loop; a later call makes a new one."""
        if self._loop is not None:
            loop, self._loop = self._loop, None
            loop.close()

    def _run(self, aw: Awaitable[T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            if asyncio.iscoroutine(aw):
                aw.close()
            raise RuntimeError(
                "jail_sandbox.sync.SandboxClient called inside a running event loop: use jail_sandbox.SandboxClient and await it"
            )
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        loop = self._loop
        task = loop.create_task(aw)  # type: ignore[arg-type]
        try:
            return loop.run_until_complete(task)
        except BaseException:
            # KeyboardInterrupt (or SystemExit) left the task running:
            # cancel it, and let it finish what it must (a one-shot
            # sandbox's removal).
            if not task.done():
                task.cancel()
                try:
                    loop.run_until_complete(task)
                except BaseException:
                    pass
            raise

    def health(self) -> Dict[str, Any]:
        return self._run(self._async.health())

    def create(self, spec: SandboxSpec, *, reuse: bool = False) -> "SandboxHandle":
        return SandboxHandle(self, self._run(self._async.create(spec, reuse=reuse)))

    def get(self, name: str) -> "SandboxHandle":
        return SandboxHandle(self, self._run(self._async.get(name)))

    def list(self, *, labels: Optional[Mapping[str, str]] = None) -> List[str]:
        return self._run(self._async.list(labels=labels))

    def remove(self, name: str, *, force: bool = True) -> None:
        self._run(self._async.remove(name, force=force))

    def run_python(
        self, code: str, *, image: Optional[str] = DEFAULT_IMAGE, timeout: Optional[float] = None, **spec_fields: Any
    ) -> ExecResult:
        return self._run(self._async.run_python(code, image=image, timeout=timeout, **spec_fields))

    def run_shell(
        self, script: str, *, image: Optional[str] = DEFAULT_IMAGE, timeout: Optional[float] = None, **spec_fields: Any
    ) -> ExecResult:
        return self._run(self._async.run_shell(script, image=image, timeout=timeout, **spec_fields))


class SandboxHandle:
    """jail_sandbox.SandboxHandle, synchronous, on its client's loop."""

    def __init__(self, client: SandboxClient, handle: _client.SandboxHandle) -> None:
        self._client = client
        self._handle = handle

    @property
    def name(self) -> str:
        return self._handle.name

    def __repr__(self) -> str:
        return f"jail_sandbox.sync.{self._handle!r}"

    def exec(
        self, cmd: Union[str, Sequence[str]], args: Optional[Sequence[str]] = None, *, timeout: Optional[float] = None
    ) -> ExecResult:
        return self._client._run(self._handle.exec(cmd, args, timeout=timeout))

    def shell(self, script: str, *, timeout: Optional[float] = None) -> ExecResult:
        return self._client._run(self._handle.shell(script, timeout=timeout))

    def stop(self) -> None:
        self._client._run(self._handle.stop())

    def kill(self) -> None:
        self._client._run(self._handle.kill())

    def logs(self, *, tail: Optional[int] = None) -> str:
        return self._client._run(self._handle.logs(tail=tail))

    def info(self) -> Dict[str, Any]:
        return self._client._run(self._handle.info())
