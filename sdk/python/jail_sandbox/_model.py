"""ExecResult and SandboxSpec, and how they map to jail's HTTP API."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ._errors import SandboxError

__all__ = ["ExecResult", "SandboxSpec", "DEFAULT_IMAGE"]

DEFAULT_IMAGE = "python:3.11-slim"

# api.CheckName: a letter or digit, then up to 62 letters, digits, _ . -
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def check_name(name: Any) -> str:
    """Returns name if it is a sandbox name; raises SandboxError otherwise,
    before anything is sent, so that no name can make a request's path
    another endpoint's ("..", "a/exec")."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = name if not isinstance(name, str) or len(name) <= 64 else name[:61] + "..."
        raise SandboxError(
            f"jail: sandbox name {shown!r}: must be a letter or digit, then at most 62 letters, digits, '_', '.' or '-'"
        )
    return name


@dataclass(frozen=True)
class ExecResult:
    """How a command ended: its output and exit code, and what else jail
    measured. A command that failed is an ExecResult with exit_code != 0
    (124 when its timeout expired, 126/127 when it could not be executed,
    128+N when signal N killed it), never an exception."""

    stdout: str
    stderr: str = ""
    exit_code: int = 0
    truncated: bool = False
    timed_out: bool = False
    oom_killed: bool = False
    signal: int = 0
    wall_ms: int = 0
    cpu_ms: int = 0
    peak_memory_bytes: int = 0
    # Why jail could not execute the command (exit 126 or 127), else "";
    # stderr ends with it too, as `jail exec` prints it.
    error: str = ""

    @property
    def output(self) -> str:
        """stdout then stderr."""
        return self.stdout + self.stderr

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.exit_code == 0

    @classmethod
    def from_api(cls, res: Any) -> "ExecResult":
        """The ExecResult of the API's result object."""
        if not isinstance(res, dict):
            raise SandboxError("jail: a result that is not a JSON object")

        def get(key: str, kind: type, default: Any) -> Any:
            v = res.get(key, default)
            if kind is int and isinstance(v, bool) or not isinstance(v, kind):
                raise SandboxError(f"jail: result field {key!r}: not a {kind.__name__}")
            return v

        stderr, error = get("stderr", str, ""), get("error", str, "")
        if error and error not in stderr:
            # As `jail run` and `jail exec` say it: on stderr.
            stderr += ("" if not stderr or stderr.endswith("\n") else "\n") + error + "\n"
        return cls(
            stdout=get("stdout", str, ""),
            stderr=stderr,
            exit_code=get("exit_code", int, 0),
            truncated=get("truncated", bool, False),
            timed_out=get("timed_out", bool, False),
            oom_killed=get("oom_killed", bool, False),
            signal=get("signal", int, 0),
            wall_ms=get("wall_ms", int, 0),
            cpu_ms=get("cpu_ms", int, 0),
            peak_memory_bytes=get("peak_memory_bytes", int, 0),
            error=error,
        )


def _strings(name: str, value: Any) -> Tuple[str, ...]:
    # A lone string would be taken as its characters.
    if isinstance(value, (str, bytes)):
        raise TypeError(f"SandboxSpec.{name}: a tuple of strings, not one string ({name}=({value!r},))")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"SandboxSpec.{name}: {item!r} is not a string")
    return items


@dataclass(frozen=True)
class SandboxSpec:
    """What a persistent sandbox is made from.

    image: an image in jail's store, or None for the host's own tree
    (read-only). memory_mib and cpus: its limits. workspace: a host
    directory mounted read-write at /workspace (a relative path is taken
    from this process's working directory). secrets: names of secrets the
    server knows (`jail secret add`, or JAIL_SECRET_<NAME> in its
    environment), given to the commands as variables of those names; the
    SDK never sees their values. egress: the host names the sandbox may
    reach through jail's egress gateway (rules as in docs/egress.md:
    "pypi.org", "**.pythonhosted.org", "api.example.com:8443"); empty, no
    network at all. labels: free-form, shown and filtered on by list().

    It is frozen and hashable: secrets and egress are made tuples and labels
    a copy, which must not be changed afterwards.
    """

    name: str
    image: Optional[str] = DEFAULT_IMAGE
    memory_mib: int = 512
    cpus: int = 1  # a float (0.5) is taken too
    workspace: Optional[str] = None
    secrets: Tuple[str, ...] = ()
    egress: Tuple[str, ...] = ()
    labels: Dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "secrets", _strings("secrets", self.secrets))
        object.__setattr__(self, "egress", _strings("egress", self.egress))
        if not isinstance(self.labels, Mapping):
            raise TypeError("SandboxSpec.labels: a dict of strings")
        labels = dict(self.labels)
        for k, v in labels.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"SandboxSpec.labels: {k!r}: keys and values are strings")
        object.__setattr__(self, "labels", labels)
        if self.image is not None and not isinstance(self.image, str):
            raise TypeError("SandboxSpec.image: a string, or None for the host's tree")
        if isinstance(self.memory_mib, bool) or not isinstance(self.memory_mib, int) or self.memory_mib <= 0:
            raise ValueError(f"SandboxSpec.memory_mib: {self.memory_mib!r}: a positive number of MiB")
        if isinstance(self.cpus, bool) or not isinstance(self.cpus, (int, float)) or not self.cpus > 0:
            raise ValueError(f"SandboxSpec.cpus: {self.cpus!r}: a positive number")
        if self.workspace is not None and not isinstance(self.workspace, (str, os.PathLike)):
            raise TypeError("SandboxSpec.workspace: a path, or None")

    def __hash__(self) -> int:
        return hash(
            (self.name, self.image, self.memory_mib, self.cpus, self.workspace, self.secrets, self.egress,
             frozenset(self.labels.items()))
        )

    def net(self) -> str:
        """The API's `net` of egress: "allow=" and the rules, or "none" for
        an empty allowlist: no gateway, no resolver, only the sandbox's
        loopback (the gateway with nothing allowed denies as much, at the
        cost of a process per sandbox)."""
        if not self.egress:
            return "none"
        for rule in self.egress:
            # One item is one rule: a ',' would add rules the caller did
            # not list, and the server's parser sees no item boundaries.
            if not rule or "," in rule or any(c.isspace() or not c.isprintable() for c in rule):
                raise SandboxError(f"jail: egress rule {rule[:64]!r}: one host-name rule per item, no ',' or spaces")
        return "allow=" + ",".join(self.egress)

    def to_api(self) -> Dict[str, Any]:
        """The body of POST /v1/sandboxes."""
        body: Dict[str, Any] = {
            "name": check_name(self.name),
            "memory": f"{self.memory_mib}M",
            "cpus": float(self.cpus),
            "net": self.net(),
        }
        if self.image is not None:
            body["image"] = self.image
        if self.workspace is not None:
            body["workspace"] = os.path.abspath(os.fspath(self.workspace))
        if self.secrets:
            body["secrets"] = list(self.secrets)
        if self.labels:
            body["labels"] = dict(self.labels)
        return body
