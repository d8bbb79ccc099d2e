// client.mjs: the MCP test's client, the official TypeScript SDK's
// (@modelcontextprotocol/sdk, installed beside it by test/mcp_test.go),
// driving `jail mcp` over stdio through every tool. The command to start is
// in argv (after the script), its environment in MCP_TEST_ENV (JSON), a
// host directory the server bound at /workspace in MCP_TEST_WORKSPACE.
// It exits 0 when every check held, and prints what failed otherwise.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command, args, env: JSON.parse(process.env.MCP_TEST_ENV), stderr: "inherit",
});
const client = new Client({ name: "jail-test", version: "1.0.0" });
await client.connect(transport);

// The tools, with their schemas: what an LLM is shown.
const { tools } = await client.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
assert.deepEqual(Object.keys(byName).sort(),
  ["run_python", "run_shell", "sandbox_create", "sandbox_exec", "sandbox_list", "sandbox_logs", "sandbox_remove"]);
for (const t of tools) {
  assert.ok(t.description.length > 20, `${t.name}: description`);
  assert.equal(t.inputSchema.type, "object", `${t.name}: input schema`);
  assert.equal(t.inputSchema.additionalProperties, false, `${t.name}: other arguments admitted`);
  assert.ok(t.outputSchema, `${t.name}: output schema`);
}
assert.deepEqual(byName.run_python.inputSchema.required, ["code"]);
assert.equal(byName.run_python.inputSchema.properties.code.type, "string");
assert.deepEqual(byName.sandbox_exec.inputSchema.required, ["name", "command"]);

// call returns a tool's structured result, checked to be no error; the
// client has validated it against the tool's output schema.
async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name}: ${JSON.stringify(res.content)}`);
  assert.equal(res.content[0].type, "text");
  return res.structuredContent;
}
// refused returns a tool error's text, checked to be jail's one line.
async function refused(name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(res.isError, `${name} ${JSON.stringify(args)}: not refused: ${JSON.stringify(res)}`);
  const text = res.content[0].text;
  assert.match(text, /^jail: [^\n]+$/);
  return text;
}

// run_python twice: a file in /tmp carries state from the first to the second.
const first = await call("run_python", { code: "x = 21 * 2\nopen('/tmp/x', 'w').write(str(x))\nprint('stored', x)" });
assert.equal(first.stdout, "stored 42\n");
assert.equal(first.exit_code, 0);
assert.equal(first.truncated, false);
const second = await call("run_python", { code: "print(int(open('/tmp/x').read()) * 10)" });
assert.equal(second.stdout, "420\n");
assert.equal(second.sandbox, first.sandbox);
// An exception is a result: stderr and exit 1.
const raised = await call("run_python", { code: "raise ValueError('boom')" });
assert.equal(raised.exit_code, 1);
assert.match(raised.stderr, /ValueError: boom/);

// run_shell, in the same sandbox, and the workspace jail mcp was given.
const shell = await call("run_shell", { script: "cat /tmp/x; echo oops >&2; echo from-mcp > /workspace/out.txt; exit 7" });
assert.deepEqual([shell.stdout, shell.stderr, shell.exit_code], ["42", "oops\n", 7]);
assert.equal(readFileSync(join(process.env.MCP_TEST_WORKSPACE, "out.txt"), "utf8"), "from-mcp\n");
// No network: jail mcp was started without --net.
const net = await call("run_python", { code: "import socket\nprint([n for _, n in socket.if_nameindex()])" });
assert.equal(net.stdout, "['lo']\n");

// A timeout, and truncation at the server's --output-limit (4K here).
const slow = await call("run_shell", { script: "echo begun; sleep 60", timeout: 1 });
assert.equal(slow.timed_out, true);
assert.equal(slow.exit_code, 124);
assert.equal(slow.stdout, "begun\n");
const big = await call("run_python", { code: "print('y' * 100000)" });
assert.equal(big.truncated, true);
assert.equal(big.stdout.length, 4096);

// Widening is refused: an image, a network, a profile, a mount, a longer
// timeout, jail's own labels.
assert.match(await refused("run_python", { code: "print(1)", image: "python:3.11-slim" }), /unknown argument "image"/);
assert.match(await refused("run_shell", { script: "true", net: "allow=*" }), /unknown argument "net"/);
assert.match(await refused("sandbox_create", { name: "wide", profile: "unconfined" }), /unknown argument "profile"/);
assert.match(await refused("sandbox_create", { name: "wide", mounts: ["/:/host:rw"] }), /unknown argument "mounts"/);
assert.match(await refused("run_shell", { script: "true", timeout: 99999 }), /at most/);
assert.match(await refused("sandbox_create", { name: "wide", labels: { "jail.mcp.scope": "x" } }), /jail's/);

// A named sandbox: create, exec, list, logs, remove.
const made = await call("sandbox_create", { name: "mcp-test-named", labels: { purpose: "test" } });
assert.equal(made.sandbox.name, "mcp-test-named");
assert.equal(made.sandbox.state, "running");
const ran = await call("sandbox_exec", { name: "mcp-test-named", command: "/bin/sh", args: ["-c", "echo in $0; id -u", "named"] });
assert.equal(ran.stdout, "in named\n0\n");
assert.equal(ran.sandbox, "mcp-test-named");
const listed = await call("sandbox_list", {});
const names = listed.sandboxes.map((s) => s.name).sort();
assert.deepEqual(names, ["mcp-test-named", first.sandbox].sort());
assert.ok(listed.sandboxes.find((s) => s.name === first.sandbox).session);
const labelled = await call("sandbox_list", { labels: { purpose: "test" } });
assert.deepEqual(labelled.sandboxes.map((s) => s.name), ["mcp-test-named"]);
const logs = await call("sandbox_logs", { name: "mcp-test-named", tail: 10 });
assert.match(logs.logs, /in named/);
assert.deepEqual(await call("sandbox_remove", { name: "mcp-test-named" }), { removed: "mcp-test-named" });
assert.match(await refused("sandbox_exec", { name: "mcp-test-named", command: "true" }), /no such sandbox/);

// The end of the session (stdin closed) removes the session's sandbox: the
// test checks that none is left.
await client.close();
console.log("ok", first.sandbox);
