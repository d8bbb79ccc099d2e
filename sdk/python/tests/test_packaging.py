"""The issue's "done when": installed with pip (or the directory copied),
a five-line script runs Python in a sandbox through a running jail serve."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parent.parent

SCRIPT = """\
import jail_sandbox
from jail_sandbox.sync import SandboxClient
result = SandboxClient().run_python("import sys; print('in a sandbox', sys.version_info[0])", image=None)
print(result.stdout, end="")
print(jail_sandbox.__file__)
"""


def _script(dir: Path, server, path_entry: str) -> str:
    (dir / "five_lines.py").write_text(SCRIPT)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "JAIL_SOCKET": server.socket,
        "PYTHONPATH": path_entry,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    out = subprocess.run([sys.executable, "five_lines.py"], cwd=dir, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_pip_install_then_five_lines(server, client, tmp_path):
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip(f"no pip for {sys.executable} (Debian: python3-pip)")
    # From a copy: pip builds in the source tree.
    src = tmp_path / "src"
    shutil.copytree(SDK, src, ignore=shutil.ignore_patterns("__pycache__", "tests", "build", "*.egg-info"))
    target = tmp_path / "site"
    # No network: the build backend is the setuptools installed here.
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index",
                          "--no-deps", "--no-cache-dir", "--disable-pip-version-check", "--target", str(target),
                          str(src)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert (target / "jail_sandbox" / "py.typed").exists()
    run = tmp_path / "run"
    run.mkdir()
    out = _script(run, server, str(target)).splitlines()
    assert out[0] == "in a sandbox 3" and out[1].startswith(str(target / "jail_sandbox")), out


def test_a_copied_directory_is_enough(server, client, tmp_path):
    shutil.copytree(SDK / "jail_sandbox", tmp_path / "jail_sandbox", ignore=shutil.ignore_patterns("__pycache__"))
    out = _script(tmp_path, server, "").splitlines()
    assert out[0] == "in a sandbox 3" and out[1].startswith(str(tmp_path / "jail_sandbox")), out
