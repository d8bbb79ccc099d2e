"""run_python as an agent's tool, through jail's Python SDK.

Agent frameworks (the OpenAI and Anthropic tool-use APIs, LangChain, the
OpenAI Agents SDK, ...) describe a tool to the model by a name, a
description and a JSON schema of its input, and call a function with what
the model asked for; the function's text is what the model reads next.
This is such a tool, with what an agent needs of one:

- One sandbox per conversation, made on the first call and kept, so that
  what one call writes (a file in /tmp or /workspace, a package installed
  in the writable root) is there for the next, as the model expects.
- Every outcome is text for the model, never an exception in the agent's
  loop: the exit code, stdout and stderr (each cut to a budget), and a
  plain note for a timeout, a memory kill or output that was cut.
- A time limit per call, a memory and CPU limit per sandbox, and no network
  unless the tool is given host names to allow (jail's egress allowlist).
- The sandbox is removed when the conversation ends (close()), and its
  name carries the conversation's id, so that one left behind by a crash
  is found and reused, or removed, by the next run of the same id.

Run it against a running `jail serve` (a scripted conversation stands in
for the model):

    jail serve &
    python3 examples/agent-tool/run_python_tool.py --image python:3.11-slim

`--image ''` uses the host's own tree, read-only, instead of an image.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
from typing import Any, Dict, Optional, Sequence

try:
    import jail_sandbox
except ImportError:  # run from a checkout: the SDK next door
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
    import jail_sandbox

from jail_sandbox import SandboxClient, SandboxError, SandboxSpec, SandboxUnavailable

# What the model is told: the schema of the tool's input, in the shape the
# tool-use APIs take (Anthropic's "input_schema"; OpenAI's function
# "parameters" is the same object).
TOOL: Dict[str, Any] = {
    "name": "run_python",
    "description": (
        "Run Python 3 code in a sandbox and return its exit code, stdout and stderr. "
        "The sandbox is kept for this conversation: files written under /tmp or /workspace "
        "are there for the next call, but each call is a new process, so define what you "
        "need again or save it to a file. Print what you want to see. There is no network "
        "unless the operator allowed some hosts."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The Python source to run, as a whole program."},
        },
        "required": ["code"],
        "additionalProperties": False,
    },
}


class PythonSandboxTool:
    """The run_python tool of one conversation."""

    def __init__(
        self,
        client: SandboxClient,
        conversation_id: str,
        *,
        image: Optional[str] = jail_sandbox.DEFAULT_IMAGE,
        timeout: float = 30.0,
        memory_mib: int = 512,
        egress: Sequence[str] = (),
        output_budget: int = 8000,
    ) -> None:
        self._client = client
        # A sandbox name: letters, digits, '-', '_' and '.', at most 64.
        # The readable part alone could name two conversations' sandboxes
        # alike ("a/b" and "a-b", ids cut alike), and the second would be
        # handed the first's (reuse): the id's hash keeps them apart.
        safe = re.sub(r"[^A-Za-z0-9_.-]", "-", conversation_id)[:40]
        digest = hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        self._spec = SandboxSpec(
            name=f"agent-{safe}-{digest}",
            image=image,
            memory_mib=memory_mib,
            egress=tuple(egress),
            labels={"purpose": "agent-tool", "conversation": safe},
        )
        self._timeout = timeout
        self._budget = output_budget
        self._box: Optional[jail_sandbox.SandboxHandle] = None
        self._lock = asyncio.Lock()

    async def _sandbox(self) -> jail_sandbox.SandboxHandle:
        async with self._lock:  # the model may call the tool in parallel
            if self._box is None:
                # A sandbox of this conversation left by an earlier run is
                # taken if it was made from the same spec, else replaced.
                self._box = await self._client.create(self._spec, reuse=True)
            return self._box

    async def __call__(self, code: str) -> str:
        """The tool: runs code and returns what the model reads."""
        if not isinstance(code, str) or not code.strip():
            return "error: give the Python code to run in `code`."
        try:
            box = await self._sandbox()
            r = await box.exec("python3", ["-c", code], timeout=self._timeout)
        except SandboxUnavailable as err:
            return f"error: the sandbox service is not available ({err}); try again later."
        except SandboxError as err:
            return f"error: the sandbox refused the request: {err.message}"
        parts = [f"exit code: {r.exit_code}"]
        if r.timed_out:
            parts.append(f"note: stopped after {self._timeout:g} s (the time limit of one call).")
        if r.oom_killed:
            parts.append("note: killed for using more memory than the sandbox has.")
        if r.truncated:
            parts.append("note: the output was longer than the sandbox keeps; the end is cut.")
        for name, text in (("stdout", r.stdout), ("stderr", r.stderr)):
            if text:
                if len(text) > self._budget:
                    text = text[: self._budget] + f"\n[... {len(text) - self._budget} more characters cut]"
                parts.append(f"{name}:\n{text}")
        return "\n".join(parts)

    async def close(self) -> None:
        """Removes the conversation's sandbox (and all it holds)."""
        async with self._lock:
            if self._box is not None:
                await self._client.remove(self._box.name)
                self._box = None


# A conversation a model might have: each item is one tool call.
SCRIPT = [
    "import csv\nrows = [(n, n * n) for n in range(1, 6)]\n"
    "with open('/tmp/squares.csv', 'w', newline='') as f:\n    csv.writer(f).writerows(rows)\nprint('wrote', len(rows), 'rows')",
    "import csv\nwith open('/tmp/squares.csv') as f:\n    print(sum(int(sq) for _, sq in csv.reader(f)))",
    "print(undefined_name)",
    "import socket\ntry:\n    socket.create_connection(('example.com', 80), timeout=3)\n    print('network: reachable')\n"
    "except OSError as e:\n    print('network: unreachable', type(e).__name__)",
    "while True:\n    pass",
]


async def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", default=None, help="jail serve's socket (default: $JAIL_SOCKET or its default)")
    ap.add_argument("--image", default=jail_sandbox.DEFAULT_IMAGE, help="the sandbox's image; '' for the host's tree")
    ap.add_argument("--conversation", default="demo", help="the conversation's id")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds one call may take")
    args = ap.parse_args(argv)

    client = SandboxClient(args.socket)
    tool = PythonSandboxTool(client, args.conversation, image=args.image or None, timeout=args.timeout)
    print(json.dumps({"tool": TOOL}))
    try:
        for code in SCRIPT:
            print(json.dumps({"call": code, "result": await tool(code)}))
    finally:
        await tool.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
