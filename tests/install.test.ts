/**
 * The installed command, as a kernel repository uses it (README#kernel-repositories): `npm pack`
 * the package, install the tarball into a directory holding only a kernel module, a config and a
 * package.json, and run `npx nlc` there with no Bun on PATH. Checks the verdicts; the report and
 * its revision in that directory; a failing case's replay line re-running verbatim there; a typo'd
 * rule name, an unknown declaration key, an unknown config key and a run that tests nothing each
 * exiting non-zero naming the cause; a failed run leaving the earlier passing report in place; an
 * install with `--ignore-scripts` (bun's binary left as its placeholder) running all the same.
 * Needs npm (the registry or its cache, for the package's dependencies) and python3 with torch.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { hasNpm, installTarball, kernelRepository, pack, sh } from "./installed.ts";

const torch = probeTorchSync();

/** The repository's kernel module: the example adaptor and four variants of it. */
const KERNEL = readFileSync(join(ROOT, "examples", "py-kernels", "naive_delta.py"), "utf8") + `

def typo_rule(*a, **kw):
    return naive_delta(*a, **kw)


typo_rule.nlc = {**naive_delta.nlc, "rules": ["gated-delta"]}


def typo_key(*a, **kw):
    return naive_delta(*a, **kw)


typo_key.nlc = {**naive_delta.nlc, "chunk_sise": 16}


def scaled(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    """A planted bug: every output 0.1 % too large."""
    o, s = naive_delta(q, k, v, forget, beta, scale, initial_state, output_final_state)
    return o * 1.001, s


scaled.nlc = naive_delta.nlc
`;

test.skipIf(!torch.available || !hasNpm)("npm pack, install in a kernel repository, npx nlc there", () => {
  const work = mkdtempSync(join(tmpdir(), "nlc-install-"));
  try {
    const tarball = pack(work);
    const repo = join(work, "repo");
    const head = kernelRepository(repo, { "kernel.py": KERNEL, "nlc.config.json": JSON.stringify({ backends: ["py:kernel.py:naive_delta"], profile: "quick" }) });

    const t0 = performance.now();
    const install = installTarball(repo, tarball);
    expect(install.code === 0 ? 0 : install.out).toBe(0);
    expect(sh(["sh", "-c", "command -v bun || echo none"], repo).out.trim()).toBe("none");

    // the config alone: the kernel's rule passes, the report lands in the repository with its revision
    const first = sh(["npx", "nlc"], repo);
    console.log(`install to first verdict: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(first.code === 0 ? 0 : first.out).toBe(0);
    const reportPath = join(repo, "reports", "conformance.json");
    const passing = readFileSync(reportPath, "utf8");
    const report = JSON.parse(passing);
    expect(report.run.revision).toBe(head);
    const status = (id: string) => report.checks.find((c: { id: string }) => c.id === id)?.status;
    expect(status("C5/py-naive_delta/delta/forward")).toBe("pass");
    expect(status("C5/py-naive_delta/delta/backward")).toBe("pass");
    expect(report.checks.every((c: { id: string }) => c.id.startsWith("C5/py-naive_delta/"))).toBe(true);

    // a planted bug fails; the passing report stays; the failing case's replay line re-runs verbatim here
    const bad = sh(["npx", "nlc", "--backend", "py:kernel.py:scaled"], repo);
    expect(bad.code).toBe(1);
    expect(readFileSync(reportPath, "utf8")).toBe(passing);
    expect(bad.out).toContain(`${join(repo, "reports", "conformance.failed.json")} (this run did not pass`);
    const failed = JSON.parse(readFileSync(join(repo, "reports", "conformance.failed.json"), "utf8"));
    const fw = failed.checks.find((c: { id: string }) => c.id === "C5/py-scaled/delta/forward");
    expect(fw.status).toBe("fail");
    expect(fw.replay).toStartWith("npx nlc --backend py:kernel.py:scaled ");
    const replay = sh(["sh", "-c", fw.replay], repo);
    expect(replay.code).toBe(1);
    expect(replay.out).toContain("fail    C5/py-scaled/delta/forward");

    // a typo'd rule name and an unknown declaration key: the backend is unavailable, named once, and the run fails
    const typos = sh(["npx", "nlc", "--backend", "py:kernel.py:typo_rule", "--backend", "py:kernel.py:typo_key"], repo);
    expect(typos.code).toBe(1);
    expect(typos.out).toContain("nlc['rules'] names 'gated-delta', which is not a rule of the registry; did you mean 'gated_delta'?");
    expect(typos.out).toContain("unknown key 'chunk_sise'; did you mean 'chunk_size'?");
    expect(typos.out).toContain("nothing ran: backend py:kernel.py:typo_rule ran no check");

    // no usable Python: everything skipped, which fails
    const none = sh(["npx", "nlc"], repo, { NLC_TORCH_PYTHON: "/nonexistent/python" });
    expect(none.code).toBe(1);
    expect(none.out).toContain("nothing ran: every selected check");
    expect(sh(["npx", "nlc", "--summary", "reports/conformance.failed.json"], repo).code).toBe(1);
    expect(readFileSync(reportPath, "utf8")).toBe(passing);

    // an unknown config key names the file, the key and the nearest known one
    writeFileSync(join(repo, "nlc.config.json"), JSON.stringify({ backends: ["py:kernel.py:naive_delta"], profle: "quick" }));
    const cfg = sh(["npx", "nlc"], repo);
    expect(cfg.code).toBe(2);
    expect(cfg.out).toContain("nlc.config.json: unknown key 'profle'; did you mean 'profile'?");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}, 600_000);

/**
 * `npm i -D <tgz> --ignore-scripts` (CI that runs no install scripts; pnpm by default): bun's own
 * binary stays its placeholder script and the command finds the binary of bun's platform package.
 */
test.skipIf(!torch.available || !hasNpm)("installed with --ignore-scripts, npx nlc runs", () => {
  const work = mkdtempSync(join(tmpdir(), "nlc-install-"));
  try {
    const tarball = pack(work);
    const repo = join(work, "repo");
    kernelRepository(repo, { "kernel.py": KERNEL, "nlc.config.json": JSON.stringify({ backends: ["py:kernel.py:naive_delta"], profile: "quick" }) });
    const install = installTarball(repo, tarball, ["--ignore-scripts"]);
    expect(install.code === 0 ? 0 : install.out).toBe(0);
    // the case this covers: bun's install script did not run, so its bin/bun.exe is the placeholder script
    expect(statSync(join(repo, "node_modules", "bun", "bin", "bun.exe")).size).toBeLessThan(4096);
    const run = sh(["npx", "nlc"], repo);
    expect(run.code === 0 ? 0 : run.out).toBe(0);
    const report = JSON.parse(readFileSync(join(repo, "reports", "conformance.json"), "utf8"));
    expect(report.checks.find((c: { id: string }) => c.id === "C5/py-naive_delta/delta/forward")?.status).toBe("pass");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}, 300_000);
