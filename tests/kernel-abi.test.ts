/**
 * The kernel ABI's one source (docs/spec/kernel-abi.md#one-source): the committed generated files
 * are current, and the table follows the declarations (input order, noGrad, extra inputs, hyper order).
 */
import { describe, expect, test } from "bun:test";
import { abiTable, ruleAbiOf, staleFiles } from "../ffi/generate.ts";
import { signature } from "../ffi/abi.ts";
import { ruleByKey } from "../src/rules/index.ts";

describe("kernel ABI generator", () => {
  test("the committed header, table and wrappers are what the generator makes now", () => {
    expect(staleFiles()).toEqual([]);
  });
  test("inputs and gradients follow the declarations", () => {
    const atlas = ruleAbiOf(ruleByKey("atlas"));
    expect(atlas.inputs).toEqual(["k", "v", "q", "alpha", "theta", "eta", "omega"]);
    expect(atlas.grads).not.toContain("dv");
    expect(ruleAbiOf(ruleByKey("trellis")).inputs).toContain("x");
    expect(ruleAbiOf(ruleByKey("moneta")).hyper.map((h) => h.name)).toEqual(Object.keys(ruleByKey("moneta").hyper));
    expect(abiTable().map((a) => a.rule)).toContain("swa");
  });
  test("a hyperparameter named like a tensor is renamed in C; the backward takes nullable upstream gradients", () => {
    const moneta = ruleAbiOf(ruleByKey("moneta"));
    expect(signature(moneta, "forward").filter((p) => p.name === "q").length).toBe(1);
    expect(signature(moneta, "forward").some((p) => p.name === "q_hyper")).toBe(true);
    const bwd = signature(ruleAbiOf(ruleByKey("delta")), "backward");
    expect(bwd.filter((p) => p.kind === "in?").map((p) => p.name)).toEqual(["dy", "dM"]);
    expect(bwd.filter((p) => p.kind === "out").map((p) => p.name)).toEqual(["dk", "dv", "dq", "dalpha", "dtheta", "dM_0"]);
  });
});
