"""ExecResult and SandboxSpec, and what they send: no server needed."""

from __future__ import annotations

import dataclasses
import os

import pytest

from jail_sandbox import DEFAULT_IMAGE, ExecResult, SandboxError, SandboxSpec, default_socket_path
from jail_sandbox import SandboxUnavailable
from jail_sandbox._model import check_name


def test_exec_result_is_frozen_with_output_and_ok():
    r = ExecResult("out\n", "err\n", 3)
    assert r.output == "out\nerr\n"
    assert not r.ok and ExecResult("x").ok
    assert (r.truncated, r.timed_out, r.oom_killed, r.signal, r.wall_ms, r.cpu_ms, r.peak_memory_bytes) == (
        False, False, False, 0, 0, 0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.stdout = "y"


def test_exec_result_from_the_api_result_object():
    r = ExecResult.from_api({
        "stdout": "a", "stderr": "", "exit_code": 124, "signal": 9, "timed_out": True, "oom_killed": False,
        "truncated": True, "wall_ms": 501, "cpu_ms": 2, "peak_memory_bytes": 4096,
    })
    assert r == ExecResult("a", "", 124, True, True, False, 9, 501, 2, 4096)
    # A command jail could not execute: the reason on stderr, as jail
    # exec prints it.
    r = ExecResult.from_api({"stdout": "", "stderr": "", "exit_code": 127, "error": "jail: exec x: command not found"})
    assert r.stderr == "jail: exec x: command not found\n" and r.error and not r.ok


@pytest.mark.parametrize("bad", [[], "x", {"exit_code": "0"}, {"exit_code": True}, {"stdout": 1}, {"truncated": 1}])
def test_exec_result_refuses_a_result_that_is_not_one(bad):
    with pytest.raises(SandboxError):
        ExecResult.from_api(bad)


def test_spec_defaults_are_the_issues():
    s = SandboxSpec("a")
    assert (s.image, s.memory_mib, s.cpus, s.workspace, s.secrets, s.egress, s.labels) == (
        "python:3.11-slim", 512, 1, None, (), (), {})
    assert DEFAULT_IMAGE == "python:3.11-slim"
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "b"


def test_spec_is_hashable_and_keeps_copies():
    labels = {"agent": "a1"}
    s = SandboxSpec("a", egress=["pypi.org"], secrets=["T"], labels=labels)
    labels["agent"] = "changed"
    assert s.labels == {"agent": "a1"} and s.egress == ("pypi.org",) and s.secrets == ("T",)
    assert hash(s) == hash(SandboxSpec("a", egress=("pypi.org",), secrets=("T",), labels={"agent": "a1"}))
    assert {s: 1}[SandboxSpec("a", egress=("pypi.org",), secrets=("T",), labels={"agent": "a1"})] == 1


def test_spec_to_api(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = SandboxSpec("dev", image=None, memory_mib=256, cpus=2, workspace="ws", secrets=("GH",),
                       egress=("pypi.org", "**.pythonhosted.org"), labels={"k": "v"}).to_api()
    assert body == {
        "name": "dev", "memory": "256M", "cpus": 2.0, "net": "allow=pypi.org,**.pythonhosted.org",
        "workspace": str(tmp_path / "ws"), "secrets": ["GH"], "labels": {"k": "v"},
    }
    # No image: the host's tree (no "image" sent). No egress: no network.
    assert SandboxSpec("x").to_api() == {"name": "x", "memory": "512M", "cpus": 1.0, "net": "none",
                                         "image": "python:3.11-slim"}


@pytest.mark.parametrize("field,value,error", [
    ("egress", "pypi.org", TypeError),        # would be its letters
    ("secrets", "TOKEN", TypeError),
    ("egress", ("a", 1), TypeError),
    ("labels", [("a", "b")], TypeError),
    ("labels", {"a": 1}, TypeError),
    ("memory_mib", 0, ValueError),
    ("memory_mib", True, ValueError),
    ("cpus", 0, ValueError),
    ("image", 3, TypeError),
])
def test_spec_refuses_wrong_types(field, value, error):
    with pytest.raises(error):
        SandboxSpec("a", **{field: value})


@pytest.mark.parametrize("rule", ["a.com,**.evil.com", "", "a.com b.com", "a.com\n", "a\x00"])
def test_one_egress_item_is_one_rule(rule):
    # A ',' inside an item would add a rule the caller never listed.
    with pytest.raises(SandboxError, match="one host-name rule per item"):
        SandboxSpec("a", egress=("ok.com", rule)).to_api()


@pytest.mark.parametrize("name", ["", ".", "..", "../run", "a/b", "a%2Fb", "a?force=1", "a#b", "-a", "a\x00",
                                  "a" * 64, "é", 3, None])
def test_bad_names_are_refused_before_sending(name):
    with pytest.raises(SandboxError, match="sandbox name"):
        check_name(name)
    with pytest.raises(SandboxError, match="sandbox name"):
        SandboxSpec(name).to_api()


def test_good_names():
    for name in ["a", "A.b_c-1", "9" * 63]:
        assert check_name(name) == name


def test_default_socket_path(monkeypatch):
    monkeypatch.setenv("JAIL_SOCKET", "/x/y.sock")
    assert default_socket_path() == "/x/y.sock"
    monkeypatch.delenv("JAIL_SOCKET")
    if os.geteuid() == 0:
        assert default_socket_path() == "/run/jail/jail.sock"
        return
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    assert default_socket_path() == "/run/user/7/jail/jail.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    with pytest.raises(SandboxUnavailable, match="JAIL_SOCKET"):
        default_socket_path()
