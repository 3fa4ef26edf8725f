/**
 * The digest of the cases a check generated (docs/spec/conformance.md#sweep-digests): a sweep's
 * evidence that its seeds ran different cases, made where the cases run (a kernel child digests its
 * own and reports it in details.case_digest).
 */
import { createHash } from "node:crypto";
import * as fc from "fast-check";

export interface CaseDigest {
  digest: string;
  cases: number;
}

/**
 * A digest of generated cases (docs/spec/conformance.md#sweep-digests): every case as its check id
 * and fc.stringify, or a child process's own digest of a check's cases (`details.case_digest`).
 */
export class CaseDigester {
  private readonly hash = createHash("sha256");
  private cases = 0;
  readonly add = (id: string, input: unknown): void => {
    this.hash.update(`${id}\n${fc.stringify(input)}\n`);
    this.cases++;
  };
  addDigest(id: string, d: CaseDigest): void {
    this.hash.update(`${id}\n#${d.digest}\n`);
    this.cases += d.cases;
  }
  result(): CaseDigest {
    return { digest: this.hash.digest("hex").slice(0, 16), cases: this.cases };
  }
}
