#!/usr/bin/env bun
/**
 * Checks the bridge's failure handling end to end (./node_modules/.bin/bun conformance/c9/bridge-selftest.ts):
 * missing python, python without torch, a process that exits at once, rejected requests (the
 * process survives and says which field), a malformed header, a killed process (signal and stderr
 * tail), a request timeout (the next request starts a new process), shutdown.
 */
import { Tensor } from "../../src/tensor.ts";
import { TorchBridge, TorchBridgeError, probeTorch, type RuleRequest } from "../../oracle/torch-bridge.ts";

let failed = 0;
function check(what: string, ok: boolean, detail = ""): void {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? `: ${detail}` : ""}`);
  if (!ok) failed++;
}

async function expectError(what: string, kind: string, f: () => Promise<unknown>, pattern?: RegExp): Promise<string> {
  try {
    await f();
    check(what, false, "no error");
    return "";
  } catch (e) {
    const ok = e instanceof TorchBridgeError && e.kind === kind && (pattern === undefined || pattern.test(e.message));
    check(what, ok, `${e instanceof TorchBridgeError ? e.kind : "?"}: ${(e as Error).message.split("\n").slice(0, 3).join(" | ")}`);
    return (e as Error).message;
  }
}

function t(shape: number[], f: (i: number) => number = (i) => Math.sin(i + 1) / 3): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return new Tensor("f64", shape, Float64Array.from({ length: n }, (_, i) => f(i)));
}

function deltaCase(d: number, s: number): RuleRequest {
  return {
    rule: "delta", config: { d, seq_len: s }, X: t([s, d]), dy: t([s, d], (i) => Math.cos(i)),
    params: {
      W_K: t([d, d]), W_V: t([d, d], (i) => Math.cos(3 * i) / 3), W_Q: t([d, d], (i) => Math.sin(2 * i) / 3),
      w_alpha: t([2 * d]), b_alpha: t([1]), w_theta: t([2 * d]), b_theta: t([1]), w_eta: t([2 * d]), b_eta: t([1]),
    },
  };
}

// 1. availability
const probe = await probeTorch();
check("probeTorch finds torch", probe.available, probe.available ? `torch ${probe.version}, startup ${probe.startupMs.toFixed(0)} ms` : probe.reason);
const noPy = await probeTorch({ python: "/nonexistent/python3" });
check("probeTorch: missing interpreter", !noPy.available && /not found|cannot start/.test(noPy.reason), noPy.available ? "" : noPy.reason);
const which = Bun.which("python3");
if (which !== null && which !== "/usr/bin/python3") {
  const noTorch = await probeTorch({ python: which });
  check("probeTorch: interpreter without torch", !noTorch.available && /torch is not importable/.test(noTorch.reason),
    noTorch.available ? `(${which} has torch ${noTorch.version})` : noTorch.reason);
}
const falsePy = await probeTorch({ python: "/bin/false" });
check("probeTorch: interpreter that exits at once", !falsePy.available && /exit code 1/.test(falsePy.reason), falsePy.available ? "" : falsePy.reason);

// 2. rejected requests keep the process alive
const br = await TorchBridge.start({ timeoutMs: 20_000 });
const pid0 = br.pid;
const ok1 = await br.runRule(deltaCase(4, 3));
check("a good request", ok1.y.shape.join(",") === "3,4");
const bad = deltaCase(4, 3);
await expectError("missing parameter names the field", "request",
  () => br.runRule({ ...bad, params: { ...bad.params, W_V: t([4, 3]) } }), /params\.W_V: expected shape \[4, 4\], got \[4, 3\]/);
await expectError("bad hyperparameter names the field", "request",
  () => br.runRule({ ...deltaCase(4, 3), rule: "trellis", config: { d: 4, seq_len: 3, d_compress: 9 } }), /config\.d_compress/);
await expectError("unknown rule", "request", () => br.runRule({ ...deltaCase(4, 3), rule: "nope" }), /unknown rule key 'nope'/);
await expectError("bad target id", "request", () => br.runModel({
  config: { d: 2, seq_len: 2, vocab: 3, heads: 1, window: 2 }, levels: [{ rule: "delta" }], active: [true], ids: [0, 1], targets: [0, 7],
  params: { model: {}, levels: [{}] },
}), /target_ids\[1\]: 7 is out of range|params\.model/);
const rawBad = await br.raw({ op: "rule", rule: "delta", config: { d: 1, seq_len: 1 } }, [["X", new Tensor("f64", [2], Float64Array.of(1, 2))]]);
check("a tensor whose shape disagrees with the declared config is rejected", rawBad.ok === false, String(rawBad.error));
const rawOp = await br.raw({ op: "frobnicate" });
check("unknown op", rawOp.ok === false && /unknown op/.test(String(rawOp.error)), String(rawOp.error));
const ok2 = await br.runRule(deltaCase(4, 3));
check("the process survived every bad request", br.pid === pid0 && ok2.y.data.every((x, i) => x === ok1.y.data[i]));

// 3. death: kill the process from outside
process.kill(br.pid!, "SIGKILL");
const msg = await expectError("a killed process is reported with its signal", "died", () => br.runRule(deltaCase(4, 3)), /signal SIGKILL|signal 9/);
void msg;
const ok3 = await br.runRule(deltaCase(4, 3));
check("the next request starts a new process", br.pid !== pid0 && ok3.y.data.every((x, i) => x === ok1.y.data[i]));
await br.close();

// 4. timeout
const slow = await TorchBridge.start({ timeoutMs: 50 });
const pidSlow = slow.pid;
await expectError("a request over its timeout", "timeout", () => slow.runRule(deltaCase(48, 400)), /timed out after 50 ms/);
check("the timed-out process was killed", await waitGone(pidSlow!));
await slow.close();

// 5. shutdown
const br2 = await TorchBridge.start();
const pid2 = br2.pid!;
await br2.close();
check("close() ends the process", await waitGone(pid2));
await expectError("a closed bridge refuses requests", "died", () => br2.runRule(deltaCase(2, 2)), /closed/);

async function waitGone(pid: number): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return true;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

console.log(failed === 0 ? "\nall bridge self-checks passed" : `\n${failed} bridge self-check(s) failed`);
process.exit(failed === 0 ? 0 : 1);
