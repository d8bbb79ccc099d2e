"""jail_sandbox: Python code drives jail's sandboxes through `jail serve`.

An asyncio client of jail's HTTP API on its unix socket, with the standard
library only (Python 3.9 or later):

    import asyncio
    from jail_sandbox import SandboxClient, SandboxSpec

    async def main():
        jail = SandboxClient()  # $JAIL_SOCKET, or jail serve's default socket
        print((await jail.run_python("print(6 * 7)", image=None)).stdout)
        box = await jail.create(SandboxSpec(name="dev", image=None))
        await box.shell("echo hi > /tmp/f")
        print((await box.exec("cat", ["/tmp/f"])).stdout)
        await jail.remove("dev")

    asyncio.run(main())

jail_sandbox.sync has the same client for scripts, without asyncio.

A command's own failure is an ExecResult (exit_code, timed_out, ...);
SandboxUnavailable says that no server answers, SandboxError that jail
refused or failed a request, with jail's `jail: ...` message.
"""

from ._client import ONE_SHOT_LABEL, SandboxClient, SandboxHandle
from ._errors import SandboxError, SandboxNotFound, SandboxUnavailable
from ._model import DEFAULT_IMAGE, ExecResult, SandboxSpec
from ._transport import default_socket_path

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_IMAGE",
    "ExecResult",
    "ONE_SHOT_LABEL",
    "SandboxClient",
    "SandboxError",
    "SandboxHandle",
    "SandboxNotFound",
    "SandboxSpec",
    "SandboxUnavailable",
    "default_socket_path",
]
