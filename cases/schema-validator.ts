/**
 * A JSON-schema validator for the suite's own schemas (the report, the fixtures), compiled by ajv
 * once per schema text and kept as ajv's standalone validation code under build/: compiling the
 * report schema costs about 0.2 s, a cached validator a few milliseconds, and every CLI run and
 * every test that writes a report pays it. The cache key is the schema text, the ajv version and
 * the options, so an edited schema is compiled afresh; a cache that cannot be written or read
 * (read-only checkout, a damaged file) only costs the compile.
 */
import type { Options, ValidateFunction } from "ajv";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { ROOT } from "../paths.ts";

const CACHE_DIR = join(ROOT, "build", "schema-validators");
const requireHere = createRequire(import.meta.url);
const AJV_VERSION: string = (requireHere("ajv/package.json") as { version: string }).version;

/** Where the validator of this schema text and these options is cached. */
export function validatorCachePath(schemaText: string, options: Options): string {
  const key = createHash("sha256").update(schemaText).update("\0").update(AJV_VERSION).update("\0").update(JSON.stringify(options)).digest("hex");
  return join(CACHE_DIR, `${key.slice(0, 24)}.cjs`);
}

/**
 * The validator of `schema` (its text as read, parsed) under `options`: from the cache when it
 * holds one, else compiled (throws what ajv throws for a schema that does not compile) and cached.
 */
export function cachedValidator(schemaText: string, schema: object, options: Options): ValidateFunction {
  const path = validatorCachePath(schemaText, options);
  try {
    const mod = requireHere(path) as ValidateFunction | { default: ValidateFunction };
    const v = typeof mod === "function" ? mod : mod.default;
    if (typeof v === "function") return v;
  } catch {
    // not cached yet, or unreadable: compile below
  }
  // ajv itself is loaded only to compile (a cached validator needs its small runtime helpers only).
  const { default: Ajv } = requireHere("ajv") as typeof import("ajv");
  const { default: standaloneCode } = requireHere("ajv/dist/standalone") as typeof import("ajv/dist/standalone");
  const ajv = new Ajv({ ...options, code: { ...options.code, source: true } });
  const validate = ajv.compile(schema);
  try {
    mkdirSync(CACHE_DIR, { recursive: true });
    const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    writeFileSync(tmp, standaloneCode(ajv, validate));
    renameSync(tmp, path);
  } catch {
    // no cache this time
  }
  return validate;
}

/** cachedValidator on a schema file. */
export function fileValidator(schemaPath: string, options: Options): { validate: ValidateFunction; schema: unknown } {
  const text = readFileSync(schemaPath, "utf8");
  const schema = JSON.parse(text) as object;
  return { validate: cachedValidator(text, schema, options), schema };
}
