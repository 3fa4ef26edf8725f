/**
 * The declarations are the only rule registry (docs/spec/names.md#registry): what the PyTorch
 * side reads (python/nlc_torch/rules_meta.json) and the names.md hyperparameter tables are
 * generated and current; the names.md tables written by hand (rule keys, per-rule parameters,
 * states) agree with the declarations; the PyTorch side's configurations and shapes are the
 * declarations'.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { ROOT } from "../paths.ts";
import { NAMES_MD_PATH, registryFiles, ruleMetaOf, type Dim } from "../ffi/generate-registry.ts";
import { RULES, isMemoryRule } from "../src/rules/index.ts";
import { withDefaults } from "../src/rules/level.ts";
import { paramShapes } from "../src/rules/level-params.ts";
import { auxParam } from "../src/rules/types.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const names = readFileSync(NAMES_MD_PATH, "utf8");

/** The section of names.md that starts at anchor `id`, up to the next anchor. */
function section(id: string): string {
  const start = names.indexOf(`<a id="${id}"></a>`);
  if (start < 0) throw new Error(`docs/spec/names.md has no anchor #${id}`);
  const next = names.indexOf("<a id=", start + 1);
  return names.slice(start, next < 0 ? undefined : next);
}

/** Rows of the first markdown table after `after` in `text`, as cells. */
function tableRows(text: string, after = ""): string[][] {
  const lines = text.slice(text.indexOf(after)).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const rows: string[][] = [];
  for (const l of lines.slice(first + 2)) {
    if (!l.startsWith("|")) break;
    rows.push(l.slice(1, -1).split("|").map((c) => c.trim()));
  }
  return rows;
}

const ticked = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** names.md's symbols for the sizes a shape is written in (#layout's table). */
const SYMBOL: Record<string, string> = { d: "d", dh: "d_hidden", m: "m_slots", dk: "d_compress" };

describe("the rule registry", () => {
  test("rules_meta.json and the names.md hyperparameter tables are what the generator makes now", () => {
    const stale = [...registryFiles()].filter(([path, text]) => !existsSync(path) || readFileSync(path, "utf8") !== text).map(([p]) => relative(ROOT, p));
    expect(stale).toEqual([]);
  });

  test("the metadata follows the declarations: symbolic shapes, zero and rule-own initial states", () => {
    const meta = Object.fromEntries(RULES.map((r) => [r.key, ruleMetaOf(r)]));
    expect(meta.moneta!.state).toEqual({ W1: ["d_hidden", "d"], W2: ["d", "d_hidden"] });
    expect(meta.moneta!.init).toEqual({ W1: "rule", W2: "zeros" });
    expect(meta.trellis!.state).toEqual({ S_K: ["d_compress", "d"], S_V: ["d", "d_compress"] });
    expect(meta.atlas!.params.W_omega).toEqual(["d", "2*d"]);
    expect(meta.comba!.params.W_P).toEqual(["d", "d"]);
    expect(meta.kda!.params.w_alpha).toEqual(["d", "2*d"]);
    expect(meta.kda!.channel_gates).toEqual(["alpha"]);
    expect(meta.titans!.step_local_state).toEqual(["S"]);
    expect(meta.swa!.memory).toBe(false);
    expect(meta.swa!.frozen).toBe(false);
  });

  test("names.md rule keys are the registry's", () => {
    const block = section("rule-keys").split("\n").find((l) => /^ {4}\S/.test(l))!;
    expect(block.trim().split(/\s+/).sort()).toEqual(RULES.map((r) => r.key).sort());
  });

  test("names.md per-rule parameters (gates, W_omega) are the declarations'", () => {
    const seen = new Set<string>();
    for (const row of tableRows(section("level-params"), "Which parameters carry gradient")) {
      const keys = ticked(row[0]!).filter((k) => RULES.some((r) => r.key === k));
      for (const key of keys) {
        const decl = RULES.find((r) => r.key === key)!;
        seen.add(key);
        // a channel gate (types.ts gateShape) is written "alpha (per channel)"
        const cells = row[2]!.split(",").map((g) => g.trim()).filter((g) => g !== "" && g !== "none");
        const perChannel = cells.filter((g) => g.endsWith(" (per channel)")).map((g) => g.slice(0, -" (per channel)".length));
        expect({ key, gates: cells.map((g) => g.replace(/ \(per channel\)$/, "")), perChannel }).toEqual({ key, gates: [...decl.gates], perChannel: [...(decl.channelGates ?? [])] });
        expect({ key, omega: ticked(row[3] ?? "").includes("W_omega") }).toEqual({ key, omega: decl.omega });
        expect({ key, aux: ticked(row[3] ?? "").filter((p) => /^W_[PAB]$/.test(p)) }).toEqual({ key, aux: (decl.auxInputs ?? []).map(auxParam) });
      }
    }
    expect([...seen].sort()).toEqual(RULES.filter((r) => isMemoryRule(r.key)).map((r) => r.key).sort());
  });

  test("names.md rule states (names, shapes, zero initial states, what a context keeps) are the declarations'", () => {
    const seen = new Set<string>();
    for (const row of tableRows(section("states"))) {
      const key = ticked(row[0]!)[0]!;
      const decl = RULES.find((r) => r.key === key);
      expect({ key, declared: decl !== undefined }).toEqual({ key, declared: true });
      seen.add(key);
      const m = ruleMetaOf(decl!);
      const stateNames = ticked(row[1]!).filter((n) => n !== "{}");
      expect({ key, state: stateNames }).toEqual({ key, state: Object.keys(m.state) });
      // shapes: "`[d, d]` each", or one per state
      const shapes = ticked(row[2]!).map((s) => s.replace(/[[\]]/g, "").split(",").map((x): Dim => SYMBOL[x.trim()] ?? x.trim()));
      const written = row[2]!.includes("each") ? stateNames.map(() => shapes[0]!) : shapes;
      expect({ key, shapes: written }).toEqual({ key, shapes: Object.values(m.state) });
      const allZero = Object.values(m.init).every((i) => i === "zeros");
      if (stateNames.length > 0) expect({ key, zeros: row[3] === "zeros" }).toEqual({ key, zeros: allZero });
      for (const [n, init] of Object.entries(m.init)) if (init === "zeros" && !allZero) expect(row[3]).toContain(`${n} = 0`);
      const kept = ticked((row[4] ?? "").split(";")[0]!); // "`M` only; `S` restarts at 0 every call"
      expect({ key, kept }).toEqual({ key, kept: stateNames.filter((n) => !m.step_local_state.includes(n)) });
    }
    expect([...seen].sort()).toEqual(RULES.map((r) => r.key).sort());
  });

  test("the Python sources cite no absolute path", () => {
    const dir = join(ROOT, "python");
    const files = readdirSync(dir, { recursive: true }).map(String).filter((f) => f.endsWith(".py") || f.endsWith(".md"));
    const bad = files.filter((f) => /(^|[\s("'`])\/(work|home|tmp|Users)\//.test(readFileSync(join(dir, f), "utf8")));
    expect(bad).toEqual([]);
  });
});

const torch = probeTorchSync();
const PYTHON = process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";

describe.skipIf(!torch.available)("the PyTorch side reads the registry", () => {
  test("its rule keys, defaults, parameter and state shapes are the declarations'", () => {
    const script = `
import json, sys
from nlc_torch import rules as r
out = {}
for k in r.RULE_KEYS:
    cfg = r.resolve_config(k, {"d": 6, "seq_len": 3})
    out[k] = {"memory": k in r.MEMORY_RULES, "gates": list(r.GATES[k]), "defaults": r.hyper_defaults(k),
              "params": {n: list(s) for n, s in r.param_shapes(k, cfg).items()},
              "state": {n: list(s) for n, s in r.state_shapes(k, cfg).items()},
              "init": {n: list(t.shape) for n, t in r.init_state(k, cfg).items()}}
json.dump(out, sys.stdout)`;
    const p = Bun.spawnSync({ cmd: [PYTHON, "-c", script], cwd: ROOT, env: { ...process.env, PYTHONPATH: join(ROOT, "python") }, stdout: "pipe", stderr: "pipe" });
    expect(p.stderr.toString()).toBe("");
    const py = JSON.parse(p.stdout.toString()) as Record<string, Record<string, unknown>>;
    expect(Object.keys(py).sort()).toEqual(RULES.map((r) => r.key).sort());
    for (const decl of RULES) {
      const cfg = withDefaults(decl, { d: 6, seq_len: 3 });
      const defaults = Object.fromEntries(Object.entries(decl.hyper).map(([n, h]) => [n, h.default]));
      const ts = {
        memory: isMemoryRule(decl.key), gates: [...decl.gates], defaults,
        params: paramShapes(decl, cfg),
        state: decl.stateShapes(cfg), init: decl.stateShapes(cfg),
      };
      expect({ key: decl.key, ...py[decl.key] }).toEqual({ key: decl.key, ...ts });
    }
  }, 120_000); // starting Python and importing torch takes seconds on a loaded machine
});
