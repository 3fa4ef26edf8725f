/**
 * The py: kernel backend end to end (docs/spec/py-backend.md): one suite run with the example
 * adaptor, its planted wrong variants and one misbehaving kernel per failure kind
 * (tests/py-kernels). The good kernel passes, the planted ones fail on the tensor they break,
 * every fault is an `error` naming the case (with the stderr tail where the process died or
 * hung), and the run goes on to the next backend. Skipped without python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { parsePyBackend } from "../conformance/kernel/python/plan.ts";
import { cli, expectStatus, pyRun } from "./py-run.ts";

const torch = probeTorchSync();

/** expect(r.status).toBe(want), showing the check's message when it differs. */
const GOOD = "py:examples/py-kernels/naive_delta.py:naive_delta";
/** [B, H, T, d] layout, a dict of two states in our layout, a fixed query scale. */
const TITANS = "py:examples/py-kernels/naive_titans.py:naive_titans";
/** The frozen read of the naive delta state. */
const READ = "py:examples/py-kernels/naive_delta.py:naive_delta_read";
const PLANTED = (k: string) => `py:examples/py-kernels/naive_delta_planted.py:${k}`;
/** bf16 in and out, f32 inside and in the state; and the same with f16 storage. */
const BF16 = "py:examples/py-kernels/naive_delta_bf16.py:naive_delta_bf16";
const F16 = "py:examples/py-kernels/naive_delta_bf16.py:naive_delta_f16";
const BAD = (k: string) => `py:tests/py-kernels/misbehaving.py:${k}`;
const FAULTS = ["dies", "hangs", "raises", "chatty", "garbage_stream", "wrong_shape", "wrong_dtype", "no_tuple", "state_in_bf16", "f64"];


test("--backend py: parsing: usage errors exit 2 and name the form", () => {
  expect(parsePyBackend("py:a/b/k.py:fn").slug).toBe("py-fn");
  expect(parsePyBackend("py:pkg.mod:Kernel").slug).toBe("py-Kernel");
  expect(() => parsePyBackend("py:nocallable")).toThrow(/py:<module>:<callable>/);
  const p = cli(["--backend", "py:mod:", "--list"]);
  expect(p.exitCode).toBe(2);
  expect(p.stderr.toString()).toContain("py:<module>:<callable>");
  const missing = cli(["--backend", "py:examples/no-such-kernel.py:fn", "--list"]);
  expect(missing.exitCode).toBe(2);
  expect(missing.stderr.toString()).toContain("no-such-kernel.py does not exist");
});

describe.skipIf(!torch.available)("py: backend run", () => {
  const backends = [...FAULTS.map(BAD), "py:tests/py-kernels/import_fails.py:kernel", PLANTED("no_initial_decay"), PLANTED("dq_scaled"),
    PLANTED("dstate0_scaled"), PLANTED("ignores_d_final"), PLANTED("explicit_correct"), PLANTED("bf16_dtheta_scaled"), GOOD, TITANS, READ, BF16, F16];
  const { get, results } = pyRun(() => backends, { NLC_PY_KERNEL_TIMEOUT: "3" });

  test("the example adaptors pass (autograd and explicit backward); rules they do not declare are no checks of the run", () => {
    for (const kind of ["forward", "backward"]) {
      expectStatus(get(GOOD, "delta", kind), "pass");
      expectStatus(get(TITANS, "titans", kind), "pass");
    }
    expectStatus(get(PLANTED("explicit_correct"), "delta", "backward"), "pass");
    for (const kind of ["forward", "backward"]) expectStatus(get(READ, "delta.frozen", kind), "pass");
    expect(get(PLANTED("explicit_correct"), "delta", "backward").message).toContain("backward by explicit");
    // not in the report: one line of the run says it (docs/spec/conformance.md#undeclared)
    expect(results().has(`C5/${parsePyBackend(GOOD).slug}/titans/forward`)).toBe(false);
  }, 300_000);

  test("planted wrong kernels fail on the tensor they break, with a replay line carrying --backend", () => {
    const fw = get(PLANTED("no_initial_decay"), "delta", "forward");
    expectStatus(fw, "fail");
    expect(fw.replay).toContain(`--backend ${PLANTED("no_initial_decay")} `);
    expect(fw.replay).toContain(" --replay ");
    const bw = get(PLANTED("dq_scaled"), "delta", "backward");
    expectStatus(bw, "fail");
    expect(bw.message).toMatch(/^dq/);
    expectStatus(get(PLANTED("dq_scaled"), "delta", "forward"), "pass");
    const ds0 = get(PLANTED("dstate0_scaled"), "delta", "backward");
    expectStatus(ds0, "fail");
    expect(ds0.message).toMatch(/^dinitial_state \[dM \(initial state\)\] \(sequence \d+\): .* at \(b=\d+, h=\d+, i=\d+, j=\d+\) /);
    // d(final state) is random and non-zero in every case: a backward that drops it fails
    expectStatus(get(PLANTED("ignores_d_final"), "delta", "backward"), "fail");
  }, 300_000);

  test("every misbehaving kernel is an error naming the case; the run goes on", () => {
    const expectations: Record<string, RegExp[]> = {
      dies: [/exit code 3/, /about to exit the process/],
      hangs: [/timed out after 3000 ms \(the limit: NLC_PY_KERNEL_TIMEOUT=3 s; raise it for a slow kernel\)/, /sleeping forever/],
      raises: [/RuntimeError: misbehaving kernel/],
      garbage_stream: [/not JSON/],
      wrong_shape: [/returned y of shape/],
      wrong_dtype: [/returned y as torch.float64, but declares dtype f32/],
      no_tuple: [/expected \(y, final_state\)/],
      state_in_bf16: [/returned final state M as torch.bfloat16, but declares state_dtype f32/],
    };
    for (const [k, patterns] of Object.entries(expectations)) {
      for (const kind of ["forward", "backward"]) {
        const r = get(BAD(k), "delta", kind);
        expect(`${k} ${kind}: ${r.status === "error" ? "error" : `${r.status} (${r.message})`}`).toBe(`${k} ${kind}: error`);
        expect(r.message).toMatch(/^case B=\d H=\d T=\d+ d=\d+ seed=\d+: /);
        for (const p of patterns) expect(r.message).toMatch(p);
      }
    }
    // a module that cannot be imported: the backend is unavailable with the reason, given once; its checks are skipped
    const imp = get("py:tests/py-kernels/import_fails.py:kernel", "delta", "forward");
    expectStatus(imp, "skip");
    expect(imp.message).toContain("is unavailable");
    expect(imp.details?.unavailable).toContain("ImportError: misbehaving module");
  }, 300_000);

  test("stdout writes of a kernel never reach the protocol; a declared f64 kernel is skipped", () => {
    for (const kind of ["forward", "backward"]) expectStatus(get(BAD("chatty"), "delta", kind), "pass");
    const f64 = get(BAD("f64"), "delta", "forward");
    expectStatus(f64, "skip");
    expect(f64.message).toContain("declares dtype f64");
  }, 300_000);

  test("bf16 and f16 kernels are judged at their precision; a 1% dtheta scale in bf16 fails", () => {
    for (const [b, storage] of [[BF16, "bf16"], [F16, "f16"]] as const) {
      for (const kind of ["forward", "backward"]) {
        const r = get(b, "delta", kind);
        expectStatus(r, "pass");
        expect(r.message).toContain(`${storage} (state f32)`);
        expect(r.details?.precision).toEqual({ storage, state: "f32", accumulate: "f32" });
      }
    }
    expectStatus(get(PLANTED("bf16_dtheta_scaled"), "delta", "forward"), "pass");
    const bw = get(PLANTED("bf16_dtheta_scaled"), "delta", "backward");
    expectStatus(bw, "fail");
    expect(bw.message).toMatch(/^dbeta \[dtheta\] \(sequence \d+\)/);
    // the bias test flags it too (on these short sequences the flash bound usually trips first)
    const dtheta = (bw.details?.tensors as Record<string, { bias: boolean; slope: number }>).dtheta!;
    expect(dtheta.bias).toBe(true);
    expect(dtheta.slope).toBeGreaterThan(5e-3);
  }, 300_000);
});
