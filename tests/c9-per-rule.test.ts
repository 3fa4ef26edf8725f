/**
 * C9 per rule (docs/spec/conformance.md#c9): a rule the PyTorch side does not know errors its own
 * checks only, naming the rule; every other C9 check still runs and passes. The PyTorch side is
 * made to forget Lattice by an interpreter wrapper (NLC_TORCH_PYTHON) that removes its forwards
 * before the bridge starts, so the reference itself carries no test switch. Skipped without
 * python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const torch = probeTorchSync();
const PYTHON = process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";

interface ReportCheck { id: string; status: string; message?: string }

describe.skipIf(!torch.available)("C9 with a rule the PyTorch side does not know", () => {
  test("that rule's checks error with its name; the others pass", () => {
    const dir = mkdtempSync(join(tmpdir(), "nlc-c9-forget-"));
    try {
      const wrapper = join(dir, "python");
      const forget = "import runpy, nlc_torch.rules as r; r.INNER.pop('lattice'); r.FROZEN.pop('lattice'); " +
        "runpy.run_module('nlc_torch.bridge', run_name='__main__', alter_sys=True)";
      writeFileSync(wrapper, `#!/bin/sh\nif [ "$1" = "-m" ]; then exec ${PYTHON} -c "${forget}"; fi\nexec ${PYTHON} "$@"\n`);
      chmodSync(wrapper, 0o755);
      const report = join(dir, "c9.json");
      const ids = ["C9/delta", "C9/swa", "C9/lattice", "C9/lattice.frozen", "C9/model/delta-k2-frozen-1", "C9/model/lattice-k2-frozen-1", "C9/model/mixed"];
      const r = Bun.spawnSync({
        cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--filter", ids.join(","), "--profile", "quick", "--report", report],
        cwd: ROOT, env: { ...process.env, NLC_TORCH_PYTHON: wrapper, NLC_SERIAL: "1" }, stdout: "pipe", stderr: "pipe",
      });
      expect(r.exitCode).toBe(1);
      const checks = (JSON.parse(readFileSync(report, "utf8")) as { checks: ReportCheck[] }).checks;
      const byId = new Map(checks.map((c) => [c.id, c]));
      for (const id of ["C9/delta", "C9/swa", "C9/model/delta-k2-frozen-1"]) expect(byId.get(id)?.status).toBe("pass");
      for (const id of ["C9/lattice", "C9/lattice.frozen", "C9/model/lattice-k2-frozen-1"]) {
        expect(byId.get(id)?.status).toBe("error");
        expect(byId.get(id)?.message).toMatch(/PyTorch reference has no forward of rule 'lattice/);
      }
      const mixed = checks.filter((c) => c.id.startsWith("C9/model/mixed"));
      expect(mixed.length).toBeGreaterThan(0);
      for (const c of mixed) expect(c.status).toBe("error"); // one of its levels is Lattice
      expect(checks.filter((c) => c.status === "error").every((c) => /lattice/.test(c.id) || c.id.startsWith("C9/model/mixed"))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
