/**
 * Wall time of `npm test` (conformance/npm-test.ts: the conformance checks under bun test plus the
 * files of tests/), measured from outside: one warm-up run (kernel builds, caches), then N timed
 * runs, each followed by the fixed baseline workload (bench/baseline.ts); prints the absolute times
 * and the ratio to the baseline. With --shard N it times each of the N shards (NLC_SHARD=i/N) in
 * turn, and their sum and largest share of an unsharded run. The report goes to a temporary folder.
 *
 *   npx bun bench/npm-test-wall.ts [--runs N] [--shard N]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { baselineMs, fmtSeconds, timed } from "./baseline.ts";
import { childEnvironment } from "../environment.ts";

const argv = process.argv.slice(2);
const opt = (name: string, dflt: number) => {
  const at = argv.indexOf(name);
  const v = at < 0 ? dflt : Number(argv[at + 1]);
  if (!Number.isInteger(v) || v < 0) {
    console.error(`npm-test-wall: ${name} expects a non-negative integer`);
    process.exit(2);
  }
  return v;
};
const runs = Math.max(1, opt("--runs", 1));
const shards = opt("--shard", 0);

const dir = mkdtempSync(join(tmpdir(), "nlc-npmtest-wall-"));

function npmTest(shard?: string): number {
  const r = timed("npm", ["test"], {
    cwd: ROOT, env: childEnvironment({ NLC_REPORT: join(dir, `r${shard ? `-${shard.replace("/", "of")}` : ""}.json`), ...(shard ? { NLC_SHARD: shard } : {}) }),
  });
  if (r.status !== 0) console.error(`npm test${shard ? ` (NLC_SHARD=${shard})` : ""} exited ${r.status}`);
  console.log(`  ${shard ? `shard ${shard}` : "npm test"}: wall ${fmtSeconds(r.wallMs)}, CPU ${fmtSeconds(r.cpuMs)}`);
  return r.wallMs;
}

try {
  console.log(`warm-up: ${fmtSeconds(npmTest())}`);
  for (let i = 0; i < runs; i++) {
    const whole = npmTest();
    const base = baselineMs();
    console.log(`npm test: ${fmtSeconds(whole)}; baseline ${fmtSeconds(base)}; ratio ${(whole / base).toFixed(1)}`);
    if (shards > 1) {
      const parts = Array.from({ length: shards }, (_, s) => npmTest(`${s + 1}/${shards}`));
      const largest = Math.max(...parts);
      console.log(`shards of ${shards}: ${parts.map(fmtSeconds).join(", ")}; sum ${fmtSeconds(parts.reduce((a, b) => a + b, 0))}; ` +
        `largest ${(100 * largest / whole).toFixed(0)} % of the unsharded run; ratio to baseline ${(largest / base).toFixed(1)}`);
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
