"""The SDK's exceptions.

A command that ran and failed is never an exception: it is an ExecResult
with its exit code. Exceptions say that jail did not run what was asked:
no server answered (SandboxUnavailable), or the server refused or failed
the request (SandboxError, with the server's own ``jail: ...`` message).
"""

from __future__ import annotations

from typing import Optional

__all__ = ["SandboxUnavailable", "SandboxError", "SandboxNotFound"]


class SandboxUnavailable(RuntimeError):
    """No trusted `jail serve` answers on the socket: none runs there, it
    went away in the middle of a request, it did not answer in time, or the
    socket is not one this user may trust. The message names the socket and
    how to start a server."""

    def __init__(self, message: str, socket_path: Optional[str] = None) -> None:
        super().__init__(message)
        self.socket_path = socket_path


class SandboxError(Exception):
    """The server refused the request (status 4xx: bad input, nothing was
    changed) or failed it (5xx), or the SDK refused it before sending it
    (status None). ``message`` is jail's one-line ``jail: ...`` error."""

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def __str__(self) -> str:
        if self.status is None:
            return self.message
        return f"{self.message} (HTTP {self.status})"


class SandboxNotFound(SandboxError):
    """No sandbox of that name (HTTP 404)."""
