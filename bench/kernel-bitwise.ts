/**
 * Two kernel libraries, the same outputs bit for bit? Calls every rule's forward, backward and
 * frozen read (and the workspace size query) with identical inputs on both libraries and compares
 * every output byte for byte: shapes with B = 2, H = 2, d = 1 and odd d, C = 1, 4, 16, dy and
 * d(final state) given or NULL, and the hyperparameter branches of Moneta (p, q), YAAD (δ) and
 * Lattice (variant). Meant for a change to the kernels that must not change their arithmetic
 * (a refactor of cuda/): build the library before and after, then
 *
 *   bun bench/kernel-bitwise.ts <before.so> <after.so> [--rules delta,titans]
 *
 * Each library runs in its own child process (`--dump <lib> <file>` writes its outputs), so two
 * builds of one library never share a process. Prints the number of calls and bytes compared and
 * every difference (rule, function, case, output, first differing element); exit 1 when any.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { ABI, tokenElems, type RuleAbi, type Shape } from "../ffi/abi.ts";
import { stateShapesOf } from "../ffi/backends.ts";
import { openKernelLib } from "../ffi/lib.ts";
import type { Arrays, KernelLib } from "../ffi/lib-types.ts";
import { Rng } from "../src/rng.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { withDefaults } from "../src/rules/level-params.ts";
import type { RuleConfig } from "../src/rules/types.ts";

const SHAPES: readonly Shape[] = [
  { B: 1, T: 7, H: 1, d: 1 },
  { B: 2, T: 9, H: 2, d: 3 },
  { B: 2, T: 20, H: 2, d: 5 },
  { B: 1, T: 18, H: 1, d: 8 },
];
const CS = [1, 4, 16];
/** Which of dy and d(final state) the backward gets (false = NULL). */
const GIVEN: readonly { dy: boolean; dFinal: boolean }[] = [
  { dy: true, dFinal: true }, { dy: false, dFinal: true }, { dy: true, dFinal: false }, { dy: false, dFinal: false },
];
/** Hyperparameter settings beyond the defaults, per rule: the branches a kernel takes on them. */
const EXTRA: Readonly<Record<string, readonly Record<string, number | string>[]>> = {
  moneta: [{ p: 1, q: 3 }, { p: 3, q: 2.5, lambda_2: 0.1 }],
  yaad: [{ delta: 0.05, lambda_local: 0.3 }],
  lattice: [{ variant: "encode" }, { variant: "similarity", m_slots: 3 }],
  trellis: [{ d_compress: 1, lambda_k: 0.2 }],
  swa: [{ window: 2 }],
  gated_delta_product: [{ n_h: 1 }, { n_h: 3 }],
};

interface Record_ { key: string; outputs: Record<string, string> }

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString("base64");

function configsOf(rule: string, s: Shape): RuleConfig[] {
  const decl = ruleByKey(rule);
  const base = { d: s.d, seq_len: s.T };
  const all = [{}, ...(EXTRA[rule] ?? [])].map((extra) => withDefaults(decl, { ...base, ...extra }));
  // hyperparameters bounded by d (Trellis' d_compress, SWA's heads) are clamped so every shape runs
  return all.map((cfg) => {
    const c = { ...cfg } as Record<string, number | string>;
    if (rule === "trellis") c.d_compress = Math.min(Number(c.d_compress), s.d);
    if (rule === "swa") c.heads = s.d % Number(c.heads) === 0 ? c.heads! : 1;
    return c as RuleConfig;
  });
}

function size(a: RuleAbi, cfg: RuleConfig, s: Shape): (name: string) => number {
  const shapes = stateShapesOf(a.rule, cfg);
  return (name) => {
    if (a.state.includes(name)) return s.B * s.H * shapes[name]!.reduce((x, y) => x * y, 1);
    return tokenElems(a, name, s, cfg);
  };
}

function values(n: number, rng: Rng, lo: number, hi: number): Float32Array {
  return Float32Array.from({ length: n }, () => Math.fround(rng.uniform(lo, hi)));
}

/** Every call on one library, in a fixed order; each record keyed by what was called. */
function dump(lib: KernelLib, rules: readonly string[] | null): Record_[] {
  const out: Record_[] = [];
  const record = (key: string, f: () => Record<string, Float32Array | number>) => {
    let outputs: Record<string, string>;
    try {
      outputs = Object.fromEntries(Object.entries(f()).map(([k, v]) => [k, typeof v === "number" ? `n:${v}` : bits(v)]));
    } catch (e) {
      outputs = { error: `e:${e instanceof Error ? e.message : String(e)}` };
    }
    out.push({ key, outputs });
  };
  for (const a of ABI.filter((x) => rules === null || rules.includes(x.rule))) {
    const pair = lib.pair(a.rule);
    if (typeof pair === "string") continue; // a rule the library does not export: no calls (the other library's dump then differs by its keys)
    for (const s of SHAPES) {
      for (const [ci, cfg] of configsOf(a.rule, s).entries()) {
        const n = size(a, cfg, s);
        const rng = new Rng(0x5eed ^ (a.rule.length * 131 + s.d * 17 + s.T + ci * 7919));
        const inputs: Arrays = Object.fromEntries(a.inputs.map((x) => [x, /alpha|theta|eta/.test(x) ? values(n(x), rng, 0.05, 0.5) : values(n(x), rng, -1, 1)]));
        const state0: Arrays = Object.fromEntries(a.state.map((x) => [x, values(n(x), rng, -0.3, 0.3)]));
        const dy = values(n("q"), rng, -1, 1);
        const dFinal: Arrays = Object.fromEntries(a.state.map((x) => [x, values(n(x), rng, -1, 1)]));
        const shapeKey = `B${s.B} T${s.T} H${s.H} d${s.d} cfg${ci}`;
        for (const C of a.recurrent ? CS : [1]) {
          const base = `${a.rule} ${shapeKey} C${C}`;
          record(`${base} workspace_bytes`, () => ({ bytes: pair.workspaceBytes(s, C, cfg) }));
          let ws: ReturnType<typeof pair.forward>["ws"] | null = null;
          record(`${base} forward`, () => {
            const f = pair.forward(s, C, cfg, inputs, state0);
            ws = f.ws;
            return { y: f.y, ...Object.fromEntries(Object.entries(f.state).map(([k, v]) => [`state ${k}`, v])) };
          });
          if (ws === null) continue;
          const w = ws as ReturnType<typeof pair.forward>["ws"];
          for (const g of a.recurrent ? GIVEN : GIVEN.filter((x) => x.dFinal)) {
            record(`${base} backward dy=${g.dy ? "given" : "NULL"} dFinal=${g.dFinal && a.recurrent ? "given" : "NULL"}`, () => {
              const b = pair.backward(s, C, cfg, inputs, state0, w, g.dy ? dy : null, g.dFinal && a.recurrent ? dFinal : null);
              return { ...b.grads, ...Object.fromEntries(Object.entries(b.dState0).map(([k, v]) => [`dState0 ${k}`, v])) };
            });
          }
          w.free();
        }
        if (!a.frozen) continue;
        const fr = lib.frozen(a.rule);
        if (typeof fr === "string") throw new Error(fr);
        const q = inputs.q!;
        record(`${a.rule} ${shapeKey} frozen_workspace_bytes`, () => ({ bytes: fr.workspaceBytes(s, cfg) }));
        for (const withDy of [true, false]) {
          record(`${a.rule} ${shapeKey} frozen dy=${withDy ? "given" : "NULL"}`, () => {
            const f = fr.forward(s, cfg, q, state0);
            try {
              const b = fr.backward(s, cfg, q, state0, f.ws, withDy ? dy : null);
              return { y: f.y, dq: b.dq, ...Object.fromEntries(Object.entries(b.dState).map(([k, v]) => [`dState ${k}`, v])) };
            } finally {
              f.ws.free();
            }
          });
        }
      }
    }
  }
  return out;
}

function compare(before: Record_[], after: Record_[]): { calls: number; bytes: number; diffs: string[] } {
  const diffs: string[] = [];
  let bytes = 0;
  if (before.length !== after.length) diffs.push(`call count ${before.length} vs ${after.length}`);
  const byKey = new Map(after.map((r) => [r.key, r]));
  for (const r of before) {
    const o = byKey.get(r.key);
    if (o === undefined) {
      diffs.push(`${r.key}: missing after`);
      continue;
    }
    const names = new Set([...Object.keys(r.outputs), ...Object.keys(o.outputs)]);
    for (const name of names) {
      const x = r.outputs[name], y = o.outputs[name];
      if (x === undefined || y === undefined) {
        diffs.push(`${r.key}: output ${name} only ${x === undefined ? "after" : "before"}`);
        continue;
      }
      if (x.startsWith("n:") || x.startsWith("e:")) {
        bytes += x.length;
        if (x !== y) diffs.push(`${r.key}: ${name} ${x} vs ${y}`);
        continue;
      }
      const bx = Buffer.from(x, "base64"), by = Buffer.from(y, "base64");
      bytes += bx.length;
      if (!bx.equals(by)) {
        const fx = new Float32Array(bx.buffer, bx.byteOffset, bx.length / 4), fy = new Float32Array(by.buffer, by.byteOffset, by.length / 4);
        const i = fx.findIndex((v, j) => !Object.is(v, fy[j]) && !(Number.isNaN(v) && Number.isNaN(fy[j]!)) || bx.readUInt32LE(4 * j) !== by.readUInt32LE(4 * j));
        diffs.push(`${r.key}: ${name} differs${bx.length !== by.length ? ` in length (${bx.length} vs ${by.length} bytes)` : ` first at [${i}]: ${fx[i]} vs ${fy[i]}`}`);
      }
    }
  }
  return { calls: before.length, bytes, diffs };
}

const USAGE = "usage: bun bench/kernel-bitwise.ts <before.so> <after.so> [--rules <rule,...>]";

function main(args: string[]): number {
  const at = args.indexOf("--rules");
  const rules = at < 0 ? null : (args[at + 1] ?? "").split(",").filter((r) => r !== "");
  const argv = at < 0 ? args : [...args.slice(0, at), ...args.slice(at + 2)];
  const unknown = (rules ?? []).filter((r) => !ABI.some((a) => a.rule === r));
  if (rules !== null && (rules.length === 0 || unknown.length > 0)) {
    console.error(`--rules: ${rules.length === 0 ? "no rule given" : `unknown rule ${unknown.join(", ")}`} (rules: ${ABI.map((a) => a.rule).join(", ")})`);
    return 2;
  }
  const ruleArgs = rules === null ? [] : ["--rules", rules.join(",")];
  if (argv[0] === "--dump") {
    const [lib, file] = [argv[1], argv[2]];
    if (lib === undefined || file === undefined) {
      console.error("usage: bun bench/kernel-bitwise.ts --dump <lib.so> <out.json> [--rules <rule,...>]");
      return 2;
    }
    writeFileSync(file, JSON.stringify(dump(openKernelLib(lib, stateShapesOf), rules)));
    return 0;
  }
  const [before, after] = argv;
  if (before === undefined || after === undefined || argv.length > 2) {
    console.error(USAGE);
    return 2;
  }
  const dir = mkdtempSync(join(tmpdir(), "nlk-bitwise-"));
  const dumped = [before, after].map((lib, i) => {
    const file = join(dir, `${i}.json`);
    const r = spawnSync(process.execPath, [import.meta.path, "--dump", lib, file, ...ruleArgs], { stdio: "inherit" });
    if (r.status !== 0) throw new Error(`dumping ${lib} failed (exit ${r.status}, signal ${r.signal})`);
    return JSON.parse(readFileSync(file, "utf8")) as Record_[];
  });
  const { calls, bytes, diffs } = compare(dumped[0]!, dumped[1]!);
  const errors = dumped[0]!.filter((r) => r.outputs.error !== undefined).length;
  console.log(`${calls} calls (${errors} of them returned an error status), ${bytes} bytes compared: ${diffs.length === 0 ? "identical" : `${diffs.length} differences`}`);
  for (const d of diffs.slice(0, 40)) console.log(`  ${d}`);
  if (diffs.length > 40) console.log(`  … ${diffs.length - 40} more`);
  return diffs.length === 0 ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
