/** Where the project's files are: the repository root, found from this file's own location. */
import { resolve } from "node:path";

export const ROOT = resolve(import.meta.dir);
