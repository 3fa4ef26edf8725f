/** C5/abi/header-matches-table: every prototype of ffi/nlk.h against the table in ffi/abi.ts. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ABI, pointerArgs, symbolName, type KernelFn } from "../../ffi/abi.ts";
import type { CaseOutcome } from "../../harness/check.ts";
import { ROOT } from "../../paths.ts";

/** nlk.h's parameter names where they differ from the table's. */
const ALIAS: Record<string, string> = { q_exp: "q" };

/** The exported prototypes of nlk.h: symbol -> parameter names, NLK_*_HYPER macros expanded. */
function prototypes(text: string): Map<string, string[]> {
  const macros = new Map<string, string>();
  for (const m of text.matchAll(/^#define (NLK_\w+_HYPER) (.+)$/gm)) macros.set(m[1]!, m[2]!);
  const protos = new Map<string, string[]>();
  for (const m of text.matchAll(/NLK_API int (nlk_\w+)\(([^;]*)\);/g)) {
    let params = m[2]!.replace(/\s+/g, " ");
    for (const [k, v] of macros) params = params.replaceAll(k, v);
    protos.set(m[1]!, params.split(",").map((p) => p.trim().split(" ").pop()!.replace(/^\*/, "")));
  }
  return protos;
}

export function abiHeaderCheck(): CaseOutcome {
  const protos = prototypes(readFileSync(join(ROOT, "ffi", "nlk.h"), "utf8"));
  for (const a of ABI) {
    const fns: KernelFn[] = a.frozen === null ? ["forward", "backward"] : ["forward", "backward", "frozen_forward", "frozen_backward"];
    for (const fn of fns) {
      const sym = symbolName(a.rule, fn);
      const got = protos.get(sym);
      if (got === undefined) return { ok: false, message: `ffi/nlk.h does not declare ${sym}` };
      const { inputs, outputs } = pointerArgs(a, fn);
      const want = ["B", "s", "d", ...a.hyper.map((h) => h.name), ...inputs, ...outputs];
      const names = got.map((n) => ALIAS[n] ?? n);
      if (names.join(",") !== want.join(",")) return { ok: false, message: `${sym}: nlk.h has (${names.join(", ")}), ffi/abi.ts says (${want.join(", ")})` };
    }
  }
  return { ok: true };
}
