/**
 * The example kernels run where their inputs are: on a machine with a GPU the kernel host passes
 * CUDA tensors, and a tensor an example creates itself (a mask, an identity, zeros) must be made on
 * the inputs' device. On the first GPU run, `deltanet_lowprec.py`'s chunked kernel built its masks
 * on the CPU and both its checks were errors ("expected self and mask to be on the same device");
 * this test reads every example for a creating call without `device=` (a `*_like` or `new_*` call
 * takes its input's device and is fine).
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";

const CREATING = /torch\.(ones|zeros|eye|arange|empty|full|tensor|rand|randn|linspace)\(/g;

/** The text of a call from its opening parenthesis to the matching one. */
function callText(src: string, open: number): string {
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    if (src[i] === "(") depth++;
    else if (src[i] === ")" && --depth === 0) return src.slice(open, i + 1);
  }
  return src.slice(open);
}

export function hostOnlyTensors(src: string): string[] {
  const found: string[] = [];
  for (const m of src.matchAll(CREATING)) {
    const call = m[0] + callText(src, m.index! + m[0].length - 1).slice(1);
    if (!/\bdevice\s*=/.test(call)) found.push(`line ${src.slice(0, m.index).split("\n").length}: ${call.replace(/\s+/g, " ")}`);
  }
  return found;
}

test("the check finds a tensor made without device= (the masks of the first GPU run)", () => {
  expect(hostOnlyTensors("strict = torch.tril(torch.ones(C, C, dtype=torch.bool), -1)")).toHaveLength(1);
  expect(hostOnlyTensors("strict = torch.tril(torch.ones(C, C, dtype=torch.bool, device=k.device), -1)")).toEqual([]);
  expect(hostOnlyTensors("eye = torch.eye(\n  C,\n  device=k.device)")).toEqual([]);
});

test("every example kernel creates its tensors on its inputs' device", () => {
  const dir = join(ROOT, "examples/py-kernels");
  const bad = readdirSync(dir).filter((f) => f.endsWith(".py"))
    .flatMap((f) => hostOnlyTensors(readFileSync(join(dir, f), "utf8")).map((w) => `${f} ${w}`));
  expect(bad).toEqual([]);
});
