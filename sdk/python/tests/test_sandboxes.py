"""Every method of the SDK against a real `jail serve` and real sandboxes.

The sandboxes have the host's tree for root (image=None): the default
image, python:3.11-slim, is not in a fresh store, and the tests never reach
a registry.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from conftest import SECRET_VALUE, Server, run
from jail_sandbox import (ONE_SHOT_LABEL, ExecResult, SandboxClient, SandboxError, SandboxHandle,
                          SandboxNotFound, SandboxSpec, SandboxUnavailable)


def spec(name, **fields):
    fields.setdefault("image", None)
    return SandboxSpec(name, **fields)


async def wait_for(what, check):
    """Polls check until it holds (a guard against a hang: 30 s)."""
    deadline = time.monotonic() + 30
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within 30 s")
        await asyncio.sleep(0.02)


def shared_dir(path):
    """A directory for a workspace, which the sandbox's root may write: the
    sandboxes of root run as host ids of their own, and jail refuses a
    workspace of host root's (what is written there would be root's)."""
    path.mkdir()
    os.chmod(path, 0o777)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
    return path


def test_a_sandbox_through_its_life(client):
    async def go():
        box = await client.create(spec("life", labels={"agent": "a1"}))
        assert isinstance(box, SandboxHandle) and box.name == "life"
        assert await client.list() == ["life"]
        assert await client.list(labels={"agent": "a1"}) == ["life"]
        assert await client.list(labels={"agent": "other"}) == []
        assert (await client.get("life")).name == "life"

        r = await box.exec("echo", ["one", "two"])
        assert r == ExecResult("one two\n", "", 0, wall_ms=r.wall_ms, cpu_ms=r.cpu_ms,
                               peak_memory_bytes=r.peak_memory_bytes)
        assert r.ok and r.output == "one two\n"
        assert (await box.exec(["sh", "-c", "echo x >&2; exit 3"])) .stderr == "x\n"
        # A command's failure is a result, never an exception.
        r = await box.shell("echo out; echo err >&2; exit 3")
        assert (r.stdout, r.stderr, r.exit_code, r.ok, r.output) == ("out\n", "err\n", 3, False, "out\nerr\n")
        r = await box.exec("no-such-command-here")
        assert r.exit_code == 127 and "command not found" in r.stderr and r.error
        r = await box.shell("kill -KILL $$")
        assert r.signal == 9 and r.exit_code == 137

        # State carries from exec to exec.
        await box.shell("echo kept > /tmp/f")
        assert (await box.exec("cat", ["/tmp/f"])).stdout == "kept\n"

        logs = await box.logs()
        assert "one two\n" in logs and "out\n" in logs and "err\n" in logs
        assert await box.logs(tail=1) == "kept\n"
        assert await box.logs(tail=0) == ""
        info = await box.info()
        assert info["state"] == "running" and info["labels"] == {"agent": "a1"}

        await client.remove("life")
        assert await client.list() == []
        with pytest.raises(SandboxNotFound):
            await client.get("life")
        with pytest.raises(SandboxNotFound):
            await box.exec("true")
        with pytest.raises(SandboxNotFound):
            await box.logs()
        with pytest.raises(SandboxNotFound):
            await client.remove("life")
    run(go())


def test_stop_and_kill_end_its_processes_and_the_next_exec_starts_it(client):
    async def go():
        box = await client.create(spec("stopper"))
        await box.shell("sleep 1000 >/dev/null 2>&1 &")
        assert "sleep 1000" in (await box.shell("ps -eo args")).stdout
        await box.stop()
        assert (await box.info())["state"] == "stopped"
        r = await box.shell("ps -eo args")
        assert r.ok and "sleep 1000" not in r.stdout
        await box.shell("sleep 1000 >/dev/null 2>&1 &")
        await box.kill()
        assert (await box.info())["state"] != "running"
        assert "sleep 1000" not in (await box.shell("ps -eo args")).stdout
        # Without force, a running sandbox is not removed.
        with pytest.raises(SandboxError) as e:
            await client.remove("stopper", force=False)
        assert e.value.status == 409
        await box.stop()
        await client.remove("stopper", force=False)
    run(go())


def test_timeouts_end_the_command_not_the_call(client):
    async def go():
        box = await client.create(spec("slow"))
        try:
            r = await box.exec("sleep", ["1000"], timeout=0.5)
            assert (r.timed_out, r.exit_code, r.ok) == (True, 124, False)
            r = await box.shell("echo started; sleep 1000", timeout=0.5)
            assert r.timed_out and r.stdout == "started\n"
            with pytest.raises(ValueError):
                await box.exec("true", timeout=-1)
            r = await client.run_shell("sleep 1000", image=None, timeout=0.5)
            assert r.timed_out and r.exit_code == 124
        finally:
            await client.remove("slow")
    run(go())


def test_output_beyond_the_limit_is_truncated(client):
    async def go():
        r = await client.run_shell("head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2", image=None)
        assert r.truncated and r.ok
        assert 0 < len(r.stdout) <= 1 << 20 and set(r.stdout) == {"a"}
    run(go())


def test_run_python_and_run_shell_leave_nothing(client):
    async def go():
        r = await client.run_python("import sys; print(6 * 7); print('e', file=sys.stderr); sys.exit(5)", image=None)
        assert (r.stdout, r.stderr, r.exit_code) == ("42\n", "e\n", 5)
        r = await client.run_shell("echo $((6 * 7)); hostname", image=None, memory_mib=64, cpus=1,
                                   labels={"who": "test"})
        assert r.ok and r.stdout.startswith("42\n")
        # Code too long for an argument goes on stdin.
        big = "x = 1\n" * 20000 + "print(len('%s'))" % ("y" * 1000)
        assert len(big) > 100000
        assert (await client.run_python(big, image=None)).stdout == "1000\n"
        assert (await client.run_shell("echo big\n" + ":\n" * 50000, image=None)).stdout == "big\n"
        assert await client.list() == []
        # A spec the server refuses: an error, and nothing made.
        with pytest.raises(SandboxError, match="jail: "):
            await client.run_python("print(1)", image=None, egress=("*",))
        with pytest.raises(TypeError):
            await client.run_python("print(1)", image=None, no_such_field=1)
    run(go())


def test_run_python_removes_its_sandbox_when_the_run_raises(client, monkeypatch):
    made = []

    async def boom(name, *args, **kwargs):
        made.append(await client.list())
        raise RuntimeError("boom")
    monkeypatch.setattr(client, "_exec", boom)

    async def go():
        with pytest.raises(RuntimeError, match="boom"):
            await client.run_python("print(1)", image=None)
        assert len(made) == 1 and len(made[0]) == 1 and made[0][0].startswith("oneshot-")
        assert await client.list() == []
    run(go())


def test_run_shell_removes_its_sandbox_when_cancelled(client, tmp_path):
    ws = shared_dir(tmp_path / "ws")

    async def go():
        # Cancelled while its command runs.
        task = asyncio.ensure_future(
            client.run_shell("touch /workspace/started; sleep 1000", image=None, workspace=str(ws)))

        async def started():
            if task.done():
                task.result()
            return (ws / "started").exists()
        await wait_for("the command started", started)
        assert len(await client.list()) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await client.list() == []
        # Cancelled while its sandbox is being made: the creation ends,
        # then the removal.
        task = asyncio.ensure_future(client.run_python("print(1)", image=None))
        await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await client.list() == []
    run(go())


def test_a_name_given_to_run_python_is_not_removed_unless_made(client):
    async def go():
        box = await client.create(spec("mine"))
        # The name is taken: the run is refused, and the sandbox that had
        # it is left alone.
        with pytest.raises(SandboxError) as e:
            await client.run_python("print(1)", image=None, name="mine")
        assert e.value.status == 409
        assert await client.list() == ["mine"]
        await client.remove(box.name)
        r = await client.run_python("print(2)", image=None, name="mine")
        assert r.stdout == "2\n" and await client.list() == []
    run(go())


def test_twenty_run_python_at_once_through_one_client(client):
    async def go():
        results = await asyncio.gather(*(client.run_python(f"print({i} * {i})", image=None) for i in range(20)))
        assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(20)]
        assert await client.list() == []
    run(go())


@pytest.mark.parametrize("fields,message", [
    ({"egress": ("*",)}, "jail: --net allow=: rule \"*\""),
    ({"egress": ("**.com",)}, "public suffix"),
    ({"egress": ("https://pypi.org/simple",)}, "jail: "),
    ({"secrets": ("NO_SUCH_SECRET_HERE",)}, "NO_SUCH_SECRET_HERE"),
    ({"workspace": "/nonexistent/workspace"}, "/nonexistent/workspace"),
    ({"labels": {"bad key": "v"}}, "label"),
])
def test_refused_specs_are_sandbox_errors_with_jails_message(client, fields, message):
    async def go():
        with pytest.raises(SandboxError) as e:
            await client.create(spec("refused", **fields))
        assert e.value.message.startswith("jail: ") and message in e.value.message, e.value.message
        assert e.value.status == 400 and not isinstance(e.value, SandboxNotFound)
        assert await client.list() == []
    run(go())


def test_bad_names_and_names_taken(client):
    async def go():
        for name in ["../x", "a/exec", "-a", ""]:
            with pytest.raises(SandboxError, match="sandbox name") as e:
                await client.create(spec(name))
            assert e.value.status is None  # refused before sending
            with pytest.raises(SandboxError, match="sandbox name"):
                await client.get(name)
        await client.create(spec("taken"))
        with pytest.raises(SandboxError) as e:
            await client.create(spec("taken"))
        assert e.value.status == 409 and e.value.message.startswith("jail: ")
        await client.remove("taken")
        with pytest.raises(SandboxNotFound):
            await SandboxHandle(client, "gone").stop()
    run(go())


def test_egress_gives_the_gateway_and_none_gives_no_network(client):
    async def go():
        open_box = await client.create(spec("egress", egress=("allowed.test", "**.example.test:8443")))
        closed = await client.create(spec("closed"))
        try:
            r = await open_box.shell("echo $HTTPS_PROXY; cat /etc/resolv.conf")
            assert r.ok and r.stdout.startswith("http://127.0.0.1:3128\n") and "127.0.0.53" in r.stdout
            r = await closed.shell("echo \"[$HTTPS_PROXY]\"; cat /proc/net/dev")
            assert r.ok and r.stdout.startswith("[]\n")
            # Only the loopback: no other interface.
            ifaces = [line.split(":")[0].strip() for line in r.stdout.splitlines()[3:]]
            assert ifaces == ["lo"], ifaces
        finally:
            await client.remove("egress")
            await client.remove("closed")
    run(go())


def test_secrets_reach_the_commands_and_never_the_output(client):
    async def go():
        box = await client.create(spec("secretive", secrets=("SDK_TOKEN",)))
        try:
            r = await box.shell('test "$SDK_TOKEN" = "%s" && echo same; echo "$SDK_TOKEN"' % SECRET_VALUE)
            assert r.stdout == "same\n[secret:SDK_TOKEN]\n", r
            assert SECRET_VALUE not in await box.logs()
        finally:
            await client.remove("secretive")
    run(go())


def test_workspace_is_the_hosts_directory(client, tmp_path, monkeypatch):
    ws = shared_dir(tmp_path / "ws")
    (ws / "in.txt").write_text("from the host\n")
    monkeypatch.chdir(tmp_path)

    async def go():
        box = await client.create(spec("ws", workspace="ws"))  # relative: from here
        try:
            r = await box.shell("cat /workspace/in.txt; echo from the sandbox > /workspace/out.txt")
            assert r.ok and r.stdout == "from the host\n"
        finally:
            await client.remove("ws")
        assert (ws / "out.txt").read_text() == "from the sandbox\n"
    run(go())


def test_create_with_reuse_keeps_or_replaces(client):
    async def go():
        box = await client.create(spec("kept", labels={"v": "1"}))
        await box.shell("echo state > /tmp/state")
        # Without reuse a taken name is refused, with jail's message.
        with pytest.raises(SandboxError) as err:
            await client.create(spec("kept", labels={"v": "1"}))
        assert err.value.status == 409 and err.value.message.startswith("jail: ")
        # The same spec: the same sandbox, its files kept.
        again = await client.create(spec("kept", labels={"v": "1"}), reuse=True)
        assert (await again.exec("cat", ["/tmp/state"])).stdout == "state\n"
        # Another spec: made anew, nothing of the old one left.
        changed = await client.create(spec("kept", labels={"v": "1"}, memory_mib=256), reuse=True)
        r = await changed.exec("cat", ["/tmp/state"])
        assert r.exit_code == 1 and r.stdout == ""
        await client.remove("kept")
    run(go())


def test_the_sync_client(sync_client, tmp_path):
    c = sync_client
    box = c.create(spec("synced", labels={"k": "v"}))
    assert box.name == "synced" and c.list() == ["synced"] and c.list(labels={"k": "v"}) == ["synced"]
    assert c.get("synced").name == "synced"
    assert box.exec("echo", ["a"]).stdout == "a\n"
    assert box.shell("echo b; exit 2").exit_code == 2
    assert box.exec("sleep", ["1000"], timeout=0.3).timed_out
    assert box.logs(tail=1) == "b\n"
    assert box.info()["state"] == "running"
    box.kill()
    box.stop()
    assert box.info()["state"] == "stopped"
    c.remove("synced")
    with pytest.raises(SandboxNotFound):
        c.get("synced")
    assert c.run_python("print('sync')", image=None).stdout == "sync\n"
    assert c.run_shell("echo sync; exit 4", image=None).exit_code == 4
    with pytest.raises(SandboxError):
        c.create(spec("x", egress=("*",)))
    assert c.list() == []


def test_a_server_that_goes_away_mid_call(fresh_server: Server):
    client = SandboxClient(fresh_server.socket)

    async def go():
        box = await client.create(spec("orphan"))
        call = asyncio.ensure_future(box.shell("touch /tmp/started; sleep 1000"))

        async def started():
            if call.done():
                call.result()
            return (await box.exec("test", ["-e", "/tmp/started"])).ok
        await wait_for("the command started", started)
        fresh_server.kill()
        with pytest.raises(SandboxUnavailable, match="went away"):
            await call
        with pytest.raises(SandboxUnavailable, match="jail serve"):
            await client.list()
        with pytest.raises(SandboxUnavailable, match="jail serve"):
            await client.run_python("print(1)", image=None)
        # A new server serves the sandbox on.
        fresh_server.start()
        assert await client.list() == ["orphan"]
        assert (await box.exec("echo", ["back"])).stdout == "back\n"
        await client.remove("orphan")
    run(go())


def test_a_one_shot_run_cut_off_by_the_server_going_away_is_removed_by_hand(fresh_server: Server):
    """What is left when the server dies mid-run carries the one-shot label,
    for whoever cleans up."""
    client = SandboxClient(fresh_server.socket)

    async def go():
        call = asyncio.ensure_future(client.run_shell("touch /tmp/started; sleep 1000", image=None))

        async def started():
            if call.done():
                call.result()
            # Not into a sandbox still being made: an exec then finds no
            # monitor (and calls the sandbox dead).
            listed = (await client._call("GET", "/v1/sandboxes")).json("list")
            if not listed or listed[0]["state"] != "running":
                return False
            return (await SandboxHandle(client, listed[0]["name"]).exec("test", ["-e", "/tmp/started"])).ok
        await wait_for("the command started", started)
        fresh_server.kill()
        with pytest.raises(SandboxUnavailable):
            await call
        fresh_server.start()
        listed = (await client._call("GET", "/v1/sandboxes")).json("list")
        assert len(listed) == 1 and ONE_SHOT_LABEL in listed[0]["labels"], listed
        await client.remove(listed[0]["name"])
    run(go())
