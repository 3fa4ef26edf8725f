/** Dense row-major tensors over f64 or f32 storage (docs/spec/decisions.md#d5: no other dtype). */

export type DType = "f64" | "f32";
export type Data = Float64Array | Float32Array;

export class Tensor {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: Data;
  /** Id of the tape that tracks this tensor (0: none). Written only by the tape. */
  tapeId = 0;

  constructor(dtype: DType, shape: readonly number[], data?: Data) {
    const n = sizeOf(shape);
    if (data === undefined) data = alloc(dtype, n);
    else if (data.length !== n) {
      throw new Error(`tensor data has ${data.length} elements, shape [${shape.join(",")}] needs ${n}`);
    }
    if ((dtype === "f64") !== (data instanceof Float64Array)) {
      throw new Error(`tensor dtype ${dtype} does not match storage ${data.constructor.name}`);
    }
    this.dtype = dtype;
    // A private copy: callers keep no handle on a tensor's shape (readonly by type, not frozen: freezing is slow).
    this.shape = shape.slice();
    this.data = data;
  }

  get size(): number {
    return this.data.length;
  }
}

export function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) {
    const s = shape[i]!;
    // s >>> 0 === s holds exactly for integers in [0, 2^32)
    if (s >>> 0 !== s) throw new Error(`invalid dimension ${s} in shape [${shape.join(",")}]`);
    n *= s;
  }
  return n;
}

export function alloc(dtype: DType, n: number): Data {
  return dtype === "f64" ? new Float64Array(n) : new Float32Array(n);
}

export function zeros(dtype: DType, shape: readonly number[]): Tensor {
  return new Tensor(dtype, shape);
}

export function fromArray(dtype: DType, shape: readonly number[], values: ArrayLike<number>): Tensor {
  const data = alloc(dtype, values.length);
  data.set(values);
  return new Tensor(dtype, shape, data);
}

export function clone(t: Tensor): Tensor {
  return new Tensor(t.dtype, t.shape, t.data.slice());
}

/** Same values, stored in another dtype (f64 -> f32 rounds to nearest). */
export function cast(t: Tensor, dtype: DType): Tensor {
  if (t.dtype === dtype) return clone(t);
  const data = alloc(dtype, t.size);
  data.set(t.data);
  return new Tensor(dtype, t.shape, data);
}

export function shapeStr(shape: readonly number[]): string {
  return `[${shape.join(",")}]`;
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Throws a message naming `what`, the expected and the actual shape. */
export function expectShape(t: Tensor, shape: readonly number[], what: string): void {
  if (!sameShape(t.shape, shape)) {
    throw new Error(`${what}: expected shape ${shapeStr(shape)}, got ${shapeStr(t.shape)}`);
  }
}

export function expectDType(t: Tensor, dtype: DType, what: string): void {
  if (t.dtype !== dtype) throw new Error(`${what}: expected dtype ${dtype}, got ${t.dtype}`);
}

export function expectFinite(t: Tensor, what: string): void {
  const d = t.data;
  for (let i = 0; i < d.length; i++) {
    if (!Number.isFinite(d[i]!)) throw new Error(`${what}: element ${i} is ${d[i]} (finite values required)`);
  }
}
