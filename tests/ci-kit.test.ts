/**
 * The CI kit for kernel repositories (README#kernel-repositories): action.yml (a reusable GitHub
 * Action) and ci/kernel-repository.yml (the documented workflow) are valid YAML, every `npx nlc`
 * command they run is a real command of the tool with real options, the workflow passes the action
 * only inputs it declares and reads only outputs it declares, and the nightly sweep's merge joins
 * every shard of its matrix. The checker is shown to catch a planted unknown option and command.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { junitXml, markdownSummary } from "../harness/report-ci.ts";
import { writeReport } from "../harness/report.ts";
import { check, report } from "./synthetic-report.ts";
import { ROOT } from "../paths.ts";
import { OPTIONS } from "../conformance/settings.ts";
import { SWEEP_COMMANDS, SWEEP_OPTIONS } from "../conformance/sweep.ts";
import { REPORT_COMMANDS } from "../conformance/report-commands.ts";

const ACTION = join(ROOT, "action.yml");
const WORKFLOW = join(ROOT, "ci", "kernel-repository.yml");

/** Every `run:` script in a parsed workflow or action. */
function scripts(node: unknown): string[] {
  if (Array.isArray(node)) return node.flatMap(scripts);
  if (node === null || typeof node !== "object") return [];
  return Object.entries(node).flatMap(([k, v]) => (k === "run" && typeof v === "string" ? [v] : scripts(v)));
}

/** The options each command of the tool takes (a run's, sweep's, a report command's). */
function optionsOf(command: string | null): string[] | null {
  if (command === null) return Object.keys(OPTIONS);
  if (command === "sweep") return Object.keys(SWEEP_OPTIONS);
  if (command === "sweep-merge" || (REPORT_COMMANDS as readonly string[]).includes(command)) return ["out"];
  if ((SWEEP_COMMANDS as readonly string[]).includes(command) || command === "selftest") return [];
  return null;
}

/** What is wrong with the `npx nlc` commands of some YAML text: unknown commands and options, each named. */
export function badCommands(yaml: string): string[] {
  const bad: string[] = [];
  for (const script of scripts(Bun.YAML.parse(yaml))) {
    for (const m of script.matchAll(/npx nlc\b([^\n;|&]*)/g)) {
      const words = m[1]!.trim().split(/\s+/).filter((w) => w !== "");
      const command = words[0] !== undefined && /^[a-z]/.test(words[0]) ? words[0] : null;
      const known = optionsOf(command);
      if (known === null) {
        bad.push(`npx nlc ${command}: not a command of the tool`);
        continue;
      }
      for (const w of words) {
        const opt = /^--([a-z-]+)/.exec(w)?.[1];
        if (opt !== undefined && !known.includes(opt)) bad.push(`npx nlc${command ? ` ${command}` : ""} --${opt}: not an option of that command`);
      }
    }
  }
  return bad;
}

test("action.yml and the workflow are valid YAML whose npx nlc commands are the tool's", () => {
  for (const file of [ACTION, WORKFLOW]) {
    const text = readFileSync(file, "utf8");
    expect(() => Bun.YAML.parse(text)).not.toThrow();
    expect(badCommands(text)).toEqual([]);
    expect(scripts(Bun.YAML.parse(text)).join("\n")).toContain("npx nlc");
  }
});

test("the checker catches an unknown option and an unknown command", () => {
  const text = readFileSync(WORKFLOW, "utf8");
  expect(badCommands(text.replace("sweep --seeds", "sweep --seed"))).toContain("npx nlc sweep --seed: not an option of that command");
  expect(badCommands(text.replace("npx nlc sweep-merge", "npx nlc sweep-join"))).toContain("npx nlc sweep-join: not a command of the tool");
  const action = readFileSync(ACTION, "utf8");
  expect(badCommands(action.replace("npx nlc junit", "npx nlc junit-xml"))).toContain("npx nlc junit-xml: not a command of the tool");
});

test("the workflow uses the action with its declared inputs and outputs; the sweep merge joins every shard", () => {
  const action = Bun.YAML.parse(readFileSync(ACTION, "utf8")) as { inputs: Record<string, unknown>; outputs: Record<string, unknown>; runs: { using: string; steps: { run?: string }[] } };
  expect(action.runs.using).toBe("composite");
  const text = readFileSync(ACTION, "utf8");
  for (const m of text.matchAll(/inputs\.([\w-]+)/g)) expect(Object.keys(action.inputs)).toContain(m[1]!);
  const wf = Bun.YAML.parse(readFileSync(WORKFLOW, "utf8")) as { jobs: Record<string, { steps: { uses?: string; id?: string; with?: Record<string, unknown> }[]; strategy?: { matrix: { shard: number[] } } }> };
  const uses = Object.values(wf.jobs).flatMap((j) => j.steps).filter((s) => s.uses?.startsWith("OWNER/nl-conformance@"));
  expect(uses.length).toBeGreaterThan(0);
  for (const s of uses) for (const k of Object.keys(s.with ?? {})) expect(Object.keys(action.inputs)).toContain(k);
  const wfText = readFileSync(WORKFLOW, "utf8");
  for (const m of wfText.matchAll(/steps\.nlc\.outputs\.([\w-]+)/g)) expect(Object.keys(action.outputs)).toContain(m[1]!);
  const shards = wf.jobs.sweep!.strategy!.matrix.shard;
  const merge = scripts(wf.jobs["sweep-merge"]).join("\n");
  for (const i of shards) expect(merge).toContain(`sweeps/sweep-${i}.json`);
  expect(scripts(wf.jobs.sweep).join("\n")).toContain(`--shard \${{ matrix.shard }}/${shards.length}`);
});

test("junit and markdown: every check a testcase (fail and vacuous failures, error an error, skip skipped); the summary appended to $GITHUB_STEP_SUMMARY", () => {
  const r = report([check("C2/a", "pass"), check("C2/b", "fail", { message: "dW <off> & \"worse\"" }), check("C5/c", "vacuous", { message: "near zero" }),
    check("C5/d", "error", { message: "boom" }), check("C9/e", "skip", { message: "no torch" })]);
  const x = junitXml(r);
  expect(x).toContain(`<testsuites name="nl-conformance" tests="5" failures="2" errors="1" skipped="1"`);
  expect(x).toContain(`<testsuite name="C5" tests="2" failures="1" errors="1" skipped="0"`);
  expect(x).toContain(`<failure message="dW &lt;off&gt; &amp; &quot;worse&quot;" type="fail">`);
  expect(x).toContain(`<skipped message="no torch"/>`);
  expect(x.match(/<testcase /g)!.length).toBe(5);
  const md = markdownSummary(r);
  expect(md).toContain("`conformance: 1 passed, 3 failed (1 fail, 1 vacuous, 1 error, 1 skipped)`");
  expect(md).toContain("| `C2/b` | fail |");
  expect(md).not.toContain("`C2/a`");
  const dir = mkdtempSync(join(tmpdir(), "nlc-ci-"));
  const path = join(dir, "r.json"), summary = join(dir, "summary.md");
  writeReport(r, path);
  writeFileSync(summary, "before\n");
  const cli = (args: string[]) => Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), ...args], cwd: dir, env: { ...process.env, GITHUB_STEP_SUMMARY: summary }, stdout: "pipe", stderr: "pipe" });
  expect(cli(["markdown", path]).exitCode).toBe(0);
  expect(readFileSync(summary, "utf8")).toBe(`before\n${md}`);
  expect(cli(["junit", path]).exitCode).toBe(0);
  expect(readFileSync(join(dir, "r.junit.xml"), "utf8")).toBe(x);
});

interface Job { permissions?: Record<string, string>; steps: { run?: string; uses?: string; with?: Record<string, string> }[] }

test("the workflow: each job declares its permissions, and only the release upload may write", () => {
  const wf = Bun.YAML.parse(readFileSync(WORKFLOW, "utf8")) as { permissions?: Record<string, string>; jobs: Record<string, Job> };
  expect(wf.permissions).toEqual({ contents: "read" });
  for (const [name, job] of Object.entries(wf.jobs)) {
    expect(job.permissions === undefined ? `${name}: no permissions` : name).toBe(name);
    const writes = Object.entries(job.permissions!).filter(([, v]) => v === "write").map(([k]) => k);
    const uploads = scripts(job).join("\n").includes("gh release");
    expect(`${name}: writes ${writes.join(", ") || "nothing"}`).toBe(`${name}: writes ${uploads ? "contents" : "nothing"}`);
  }
});

test("the nightly sweep takes a new window of 200 seeds each run", () => {
  const wf = Bun.YAML.parse(readFileSync(WORKFLOW, "utf8")) as { jobs: Record<string, Job> };
  const script = scripts(wf.jobs.sweep).find((s) => s.includes("npx nlc sweep"))!.replace(/\$\{\{ matrix\.shard \}\}/g, "1");
  // the script as the runner runs it, with npx replaced by a function that prints its --seeds
  const seedsOf = (run: number) => {
    const r = Bun.spawnSync({ cmd: ["bash", "-c", `npx() { shift 2; echo "$2"; }; ${script}`], env: { ...process.env, GITHUB_RUN_NUMBER: String(run) }, stdout: "pipe", stderr: "pipe" });
    return r.stdout.toString().trim();
  };
  expect(seedsOf(1)).toBe("1..200");
  expect(seedsOf(2)).toBe("201..400");
  expect(seedsOf(7)).toBe("1201..1400");
});

test("the action uploads the report its `report` input names and the files beside it, not a fixed folder", () => {
  const action = Bun.YAML.parse(readFileSync(ACTION, "utf8")) as { runs: { steps: { id?: string; run?: string; uses?: string; with?: Record<string, string> }[] } };
  const upload = action.runs.steps.find((s) => s.uses?.startsWith("actions/upload-artifact"))!;
  expect(upload.with!.path).toBe("${{ steps.run.outputs.files }}");
  // the run step's outputs for report: out/nightly.json, with npx replaced by a no-op
  const dir = mkdtempSync(join(tmpdir(), "nlc-action-"));
  const run = action.runs.steps.find((s) => s.id === "run")!.run!;
  const out = join(dir, "github-output");
  writeFileSync(out, "");
  Bun.spawnSync({ cmd: ["bash", "-c", `npx() { return 1; }; ${run}`], cwd: dir, env: { ...process.env, NLC_REPORT_PATH: "out/nightly.json", NLC_TORCH_PYTHON: "python3", GITHUB_OUTPUT: out } });
  expect(readFileSync(out, "utf8").split("\n")).toContain("files=out/nightly.*");
});
