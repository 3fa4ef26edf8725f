/**
 * A py: kernel runs as in a user's program (docs/spec/py-backend.md#default-dtype): torch's default
 * dtype is float32 while its module is imported and while it is called, though the kernel host itself
 * runs in float64. tests/py-kernels/default_dtype.py allocates its zero state and a module-level
 * constant without a dtype; judged as shipped it passes forward and backward (before, its first matmul
 * of a float64 state with f32 inputs raised, and the check was an error the host caused). Skipped
 * without PyTorch.
 */
import { test } from "bun:test";
import { expectStatus, pyRun } from "./py-run.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const K = "py:tests/py-kernels/default_dtype.py:default_dtype_delta";
const run = pyRun(() => [K], {}, 0);

test.skipIf(!probeTorchSync().available)("py: a kernel allocating without a dtype gets float32, as in a user's program, and passes", () => {
  for (const kind of ["forward", "backward"]) expectStatus(run.get(K, "delta", kind), "pass");
}, 300_000);
