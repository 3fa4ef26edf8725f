/** Shape and dtype checks and the small data functions shared by the tape ops. */
import { Tensor, alloc, sameShape, shapeStr, type Data } from "../tensor.ts";
import { type Draw } from "./define.ts";

export type G = Draw;
export const dim = (g: G, min = 1, max = 7): number => g.int(min, max);

/** Messages are built only on failure: ops run millions of times. */
export function need(cond: boolean, op: string, msg: () => string): void {
  if (!cond) throw new Error(`${op}: ${msg()}`);
}
export function rank(t: Tensor, r: number, op: string, what: string): void {
  need(t.shape.length === r, op, () => `${what} must have rank ${r}, got shape ${shapeStr(t.shape)}`);
}
export function sameShapes(op: string, a: Tensor, b: Tensor): void {
  need(sameShape(a.shape, b.shape), op, () => `shapes differ: ${shapeStr(a.shape)} vs ${shapeStr(b.shape)}`);
  need(a.dtype === b.dtype, op, () => `dtypes differ: ${a.dtype} vs ${b.dtype}`);
}
export function mapData(x: Tensor, f: (v: number) => number): Tensor {
  const out = alloc(x.dtype, x.size);
  const d = x.data;
  for (let i = 0; i < d.length; i++) out[i] = f(d[i]!);
  return new Tensor(x.dtype, x.shape, out);
}
export function scaled(d: Data, c: number): Data {
  const o = d.slice();
  for (let i = 0; i < o.length; i++) o[i]! *= c;
  return o;
}
/** Rows x cols view of a tensor of rank >= 1 (last axis = cols). */
export function rowsCols(t: Tensor): [number, number] {
  const cols = t.shape.length === 0 ? 1 : t.shape[t.shape.length - 1]!;
  return [cols === 0 ? 0 : t.size / cols, cols];
}
export const elementwise = (g: G) => {
  const shape = g.shape(1, 3, 6);
  return shape;
};
