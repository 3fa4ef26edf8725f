/**
 * A bridge start whose handshake times out is tried once more with twice the time
 * (oracle/torch-bridge.ts START_ATTEMPTS): on a starved machine importing torch can outlast the
 * limit, and every C9 check of that run would otherwise be an error (sweep seed 21 at load 15).
 * A start that never answers still ends as "unavailable", naming both attempts. Skipped without
 * python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TorchBridge, probeTorchSync } from "../oracle/torch-bridge.ts";

const torch = probeTorchSync();
const PYTHON = process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";

/** An interpreter that sleeps before its first `n` starts, then is the real one. */
function slowStarts(dir: string, n: number): string {
  const wrapper = join(dir, "python");
  const marks = Array.from({ length: n }, (_, i) => join(dir, `started-${i}`));
  const sleeps = marks.map((m) => `if [ ! -e ${m} ]; then touch ${m}; sleep 30; fi`).join("\n");
  writeFileSync(wrapper, `#!/bin/sh\n${sleeps}\nexec ${PYTHON} "$@"\n`);
  chmodSync(wrapper, 0o755);
  return wrapper;
}

describe.skipIf(!torch.available)("a bridge start that times out", () => {
  test("is tried once more and then answers", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nlc-bridge-retry-"));
    try {
      const b = await TorchBridge.start({ python: slowStarts(dir, 1), startTimeoutMs: 8_000 });
      expect(existsSync(join(dir, "started-0"))).toBe(true);
      expect(b.info.torch.length).toBeGreaterThan(0);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  test("two timed-out starts end as unavailable, naming the attempts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nlc-bridge-retry-"));
    try {
      const err = await TorchBridge.start({ python: slowStarts(dir, 2), startTimeoutMs: 1_000 }).then(() => null, (e: Error) => e);
      expect(err?.message).toMatch(/could not start the bridge \(2 attempts\): torch bridge: hello timed out after 2000 ms/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
