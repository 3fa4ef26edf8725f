/**
 * Statements about other projects' kernels carry their repro (docs/spec/py-backend.md#repros):
 * every script of repros/claims.json exists, is named in the section that makes its statement,
 * and every script under repros/ is listed; where NLC_FLA_PYTHON names a Python with fla, each
 * script runs and ends SHOWN (skipped with the reason otherwise: CI has no fla).
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";

interface Claim { script: string; doc: string; anchor: string | null; statement: string }
const CLAIMS = (JSON.parse(readFileSync(join(ROOT, "repros/claims.json"), "utf8")) as { claims: Claim[] }).claims;

/** The text of a doc's section: from its anchor to the next anchor (the whole file for null). */
export function sectionOf(doc: string, anchor: string | null): string | null {
  const text = readFileSync(join(ROOT, doc), "utf8");
  if (anchor === null) return text;
  const at = text.indexOf(`<a id="${anchor}"></a>`);
  if (at < 0) return null;
  const next = text.indexOf("<a id=", at + 1);
  return text.slice(at, next < 0 ? undefined : next);
}

test("every claimed repro exists and is named in the section that states it", () => {
  const missing: string[] = [];
  for (const c of CLAIMS) {
    if (!existsSync(join(ROOT, c.script))) missing.push(`${c.script}: no such file`);
    const sec = sectionOf(c.doc, c.anchor);
    if (sec === null) missing.push(`${c.doc}#${c.anchor}: no such anchor`);
    else if (!sec.includes(c.script)) missing.push(`${c.doc}${c.anchor ? `#${c.anchor}` : ""} does not name ${c.script} ("${c.statement}")`);
  }
  expect(missing).toEqual([]);
});

test("every script under repros/ is a listed claim's, and ends SHOWN or NOT SHOWN", () => {
  const listed = new Set(CLAIMS.map((c) => c.script));
  const found: string[] = [];
  for (const dir of readdirSync(join(ROOT, "repros"), { withFileTypes: true })) {
    if (!dir.isDirectory()) continue;
    for (const f of readdirSync(join(ROOT, "repros", dir.name))) if (f.endsWith(".py")) found.push(`repros/${dir.name}/${f}`);
  }
  expect(found.filter((f) => !listed.has(f))).toEqual([]);
  for (const f of found) {
    const text = readFileSync(join(ROOT, f), "utf8");
    expect(text).toContain('"SHOWN" if shown else "NOT SHOWN"');
    // standalone: nothing of the suite is imported (the interpreter support of triton_cpu.py, which judges nothing, aside)
    expect(text).not.toMatch(/^\s*(from|import)\s+(nlc_torch(?!\s+import\s+triton_cpu\b)|conformance|oracle)/m);
  }
});

const PY = process.env.NLC_FLA_PYTHON;
const probe = PY === undefined ? null : Bun.spawnSync({ cmd: [PY, "-c", "import fla, torch, triton"], stdout: "pipe", stderr: "pipe" });
const reason = PY === undefined ? "NLC_FLA_PYTHON is not set (a Python with fla-core, torch and triton)"
  : probe!.exitCode !== 0 ? `${PY} cannot import fla, torch and triton: ${probe!.stderr.toString().trim().split("\n").at(-1)}` : null;
if (reason !== null) console.error(`tests/repros.test.ts: the repros are not run: ${reason}`);

test.skipIf(reason !== null)("each repro shows its statement where fla runs", () => {
  const got: Record<string, string> = {};
  for (const script of [...new Set(CLAIMS.map((c) => c.script))]) {
    const p = Bun.spawnSync({ cmd: [PY!, "-W", "ignore", script], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
    const last = p.stdout.toString().trim().split("\n").filter((l) => /SHOWN/.test(l)).at(-1) ?? p.stderr.toString().trim().split("\n").at(-1);
    got[script] = `exit ${p.exitCode}: ${(last ?? "").split(":")[0]}`;
  }
  expect(got).toEqual(Object.fromEntries(Object.keys(got).map((s) => [s, "exit 0: SHOWN"])));
}, 1_800_000);
