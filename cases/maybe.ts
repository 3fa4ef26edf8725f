/**
 * A value now, or its promise: one body for work whose steps answer at once (a native kernel, the
 * TypeScript reference) or later (a kernel in another process, the PyTorch yardstick). A step that
 * answers at once keeps the whole chain synchronous, at no cost.
 */
export type Maybe<T> = T | Promise<T>;

/** `f` on `x` now, or when its promise resolves. */
export function then<T, U>(x: Maybe<T>, f: (t: T) => Maybe<U>): Maybe<U> {
  return x instanceof Promise ? x.then(f) : f(x);
}
