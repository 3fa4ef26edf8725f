"""The bridge process: `PYTHONPATH=python /usr/bin/python3 -m nlc_torch.bridge`.

Protocol (python/PROTOCOL.md): each message is one line of JSON (UTF-8, '\\n'-terminated) whose
"tensors" entry lists {name, shape, nbytes}, followed by the raw little-endian f64 bytes of
those tensors in the listed order. Requests: hello, rule, model, shutdown. Every request gets
exactly one reply; a bad request gets {"ok": false, "error": "..."} and the process goes on.
Nothing but protocol goes to stdout; logs go to stderr.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from typing import Dict, List, Optional, Tuple

from . import PROTOCOL_VERSION

MAX_TENSOR_BYTES = 1 << 30


def log(msg: str) -> None:
    sys.stderr.write(f"[nlc_torch.bridge] {msg}\n")
    sys.stderr.flush()


class Channel:
    def __init__(self, inp, out):
        self.inp = inp
        self.out = out

    def read_message(self) -> Optional[Tuple[Optional[dict], Dict[str, Tuple[List[int], bytes]], Optional[str]]]:
        """Returns None at EOF, else (header or None, tensors, error). The payload bytes that a
        parseable header announces are always consumed, even when the request is bad."""
        line = self.inp.readline()
        if not line:
            return None
        if line.strip() == b"":
            return ({}, {}, "empty header line")
        try:
            header = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            return (None, {}, f"header: not a JSON line ({e})")
        if not isinstance(header, dict):
            return (None, {}, "header: expected a JSON object")
        specs = header.get("tensors", [])
        if not isinstance(specs, list):
            return (header, {}, "tensors: expected a list of {name, shape, nbytes}")
        tensors: Dict[str, Tuple[List[int], bytes]] = {}
        error = None
        for i, spec in enumerate(specs):
            nbytes = spec.get("nbytes") if isinstance(spec, dict) else None
            if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0 or nbytes > MAX_TENSOR_BYTES:
                # Without a byte count the stream cannot be resynchronised past this entry.
                return (header, tensors, error or f"tensors[{i}].nbytes: expected a non-negative integer, got {nbytes!r}"
                        " (payload of later entries not consumed)")
            data = self._read_exact(nbytes)
            if data is None:
                return None
            if error is not None:
                continue
            name, shape = spec.get("name"), spec.get("shape")
            if not isinstance(name, str) or not name:
                error = f"tensors[{i}].name: expected a non-empty string"
            elif name in tensors:
                error = f"tensors[{i}].name: duplicate tensor '{name}'"
            elif not isinstance(shape, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in shape):
                error = f"tensors.{name}.shape: expected a list of non-negative integers, got {shape!r}"
            elif math.prod(shape) * 8 != nbytes:
                error = f"tensors.{name}.nbytes: {nbytes} bytes, shape {shape} needs {math.prod(shape) * 8}"
            else:
                tensors[name] = (shape, data)
        return (header, tensors, error)

    def _read_exact(self, n: int) -> Optional[bytes]:
        chunks, got = [], 0
        while got < n:
            b = self.inp.read(n - got)
            if not b:
                return None
            chunks.append(b)
            got += len(b)
        return b"".join(chunks)

    def write(self, header: dict, tensors: List[Tuple[str, "object"]] = ()) -> None:
        specs, blobs = [], []
        for name, t in tensors:  # torch is imported only when there are tensors to send
            import torch
            t = t.detach().to(torch.float64).contiguous().cpu()
            b = t.numpy().tobytes() if hasattr(t, "numpy") and _has_numpy() else _tensor_bytes(t)
            specs.append({"name": name, "shape": list(t.shape), "nbytes": len(b)})
            blobs.append(b)
        header = dict(header)
        header["tensors"] = specs
        self.out.write(json.dumps(header, allow_nan=False, separators=(",", ":")).encode("utf-8") + b"\n")
        for b in blobs:
            self.out.write(b)
        self.out.flush()


_NUMPY: Optional[bool] = None


def _has_numpy() -> bool:
    global _NUMPY
    if _NUMPY is None:
        try:
            import numpy  # noqa: F401
            import torch
            torch.zeros(1, dtype=torch.float64).numpy()
            _NUMPY = sys.byteorder == "little"
        except Exception:  # torch without numpy support
            _NUMPY = False
    return _NUMPY


def _tensor_bytes(t) -> bytes:
    import struct
    flat = t.reshape(-1).tolist()
    return struct.pack(f"<{len(flat)}d", *flat)


def _to_tensor(shape: List[int], data: bytes):
    import torch
    if sys.byteorder == "little":
        t = torch.frombuffer(bytearray(data), dtype=torch.float64) if data else torch.zeros(0, dtype=torch.float64)
    else:
        import struct
        n = len(data) // 8
        t = torch.tensor(struct.unpack(f"<{n}d", data), dtype=torch.float64)
    return t.reshape(shape).clone()


class Handler:
    def __init__(self):
        self.torch = None
        self.torch_error = None
        try:
            import torch
            torch.set_default_dtype(torch.float64)
            nthreads = os.environ.get("NLC_TORCH_THREADS")
            if nthreads:
                torch.set_num_threads(int(nthreads))
            self.torch = torch
        except Exception as e:  # reported by hello and every request
            self.torch_error = f"torch is not importable by {sys.executable}: {type(e).__name__}: {e}"
            log(self.torch_error)

    def need_torch(self):
        if self.torch is None:
            raise RequestError(self.torch_error or "torch unavailable")

    def hello(self, header, tensors):
        if self.torch is None:
            return {"ok": False, "error": self.torch_error, "protocol": PROTOCOL_VERSION,
                    "python": sys.version.split()[0], "pid": os.getpid()}, []
        from .rules import RULE_KEYS, hyper_defaults, implemented_rules
        keys = implemented_rules()
        return {"ok": True, "protocol": PROTOCOL_VERSION, "torch": self.torch.__version__,
                "python": sys.version.split()[0], "pid": os.getpid(), "dtype": "f64", "rules": keys,
                "models": [{"composition": c, "k": [1, 2, 4], "freq_schedule": ["fixed", "learned"]}
                           for c in ("mag", "mac", "mal")],
                "hyper_defaults": {r: hyper_defaults(r) for r in RULE_KEYS}}, []

    def rule(self, header, tensors):
        self.need_torch()
        from .rules import run_rule
        key = header.get("rule")
        frozen = header.get("frozen", False)
        if not isinstance(key, str):
            raise RequestError("rule: expected a rule key string")
        if key.endswith(".frozen"):
            key, frozen = key[: -len(".frozen")], True
        if not isinstance(frozen, bool):
            raise RequestError("frozen: expected a boolean")
        cfg = header.get("config")
        if not isinstance(cfg, dict):
            raise RequestError("config: expected an object")
        X = dy = None
        params, state = {}, {}
        for name, (shape, data) in tensors.items():
            t = _to_tensor(shape, data)
            if name == "X":
                X = t
            elif name == "dy":
                dy = t
            elif name.startswith("params."):
                params[name[len("params."):]] = t
            elif name.startswith("state."):
                state[name[len("state."):]] = t
            else:
                raise RequestError(f"tensors.{name}: unknown tensor (expected X, dy, params.<name>, state.<name>)")
        r = run_rule(key, frozen, cfg, X, dy, params, state)
        out = [("y", r["y"]["y"])]
        out += [(f"state.{n}", t) for n, t in r["state"].items()]
        out += [(f"grads.{n}", t) for n, t in r["grads"].items()]
        out += [(f"grads.state.{n}", t) for n, t in r["state_grads"].items()]
        return {"ok": True, "rule": key, "frozen": frozen}, out

    def model(self, header, tensors):
        self.need_torch()
        from .model import run_model
        comp = header.get("composition", "mag")
        if comp not in ("mag", "mac", "mal"):
            raise RequestError(f"composition: '{comp}' is not supported (supported: mag, mac, mal)")
        cfg = header.get("config")
        if not isinstance(cfg, dict):
            raise RequestError("config: expected an object")
        spec = dict(cfg)
        spec["pattern"] = comp
        levels = header.get("levels")
        if levels is None:  # fixture style: one rule for every level, hyperparameters in config
            rule, k = header.get("rule"), header.get("k")
            if not isinstance(rule, str) or not isinstance(k, int) or k < 1:
                raise RequestError("levels: missing (or give 'rule' and 'k')")
            hyper = {n: v for n, v in cfg.items() if n not in ("d", "seq_len", "vocab", "heads", "window",
                                                               "freq_schedule", "freq_threshold", "chunk_sizes",
                                                               "persistent")}
            levels = [{"rule": rule, "hyper": hyper} for _ in range(k)]
        spec["levels"] = levels
        if "chunk_sizes" in header:
            spec["chunk_sizes"] = header["chunk_sizes"]
        k = len(levels) if isinstance(levels, list) else 0
        pm: Dict[str, object] = {}
        pl: List[Dict[str, object]] = [{} for _ in range(k)]
        ctx: List[Optional[Dict[str, object]]] = [None] * k
        for name, (shape, data) in tensors.items():
            t = _to_tensor(shape, data)
            parts = name.split(".")
            if len(parts) == 3 and parts[0] == "params" and parts[1] == "model":
                pm[parts[2]] = t
            elif len(parts) == 4 and parts[0] == "params" and parts[1] == "levels" and parts[2].isdigit():
                l = int(parts[2])
                if l >= k:
                    raise RequestError(f"tensors.{name}: level {l} but k = {k}")
                pl[l][parts[3]] = t
            elif len(parts) == 3 and parts[0] == "context" and parts[1].isdigit():
                l = int(parts[1])
                if l >= k:
                    raise RequestError(f"tensors.{name}: level {l} but k = {k}")
                ctx[l] = ctx[l] or {}
                ctx[l][parts[2]] = t
            else:
                raise RequestError(f"tensors.{name}: unknown tensor (expected params.model.<n>, "
                                   "params.levels.<l>.<n>, context.<l>.<n>)")
        r = run_model(spec, header.get("input_ids"), header.get("target_ids"), pm, pl, ctx,
                      active=header.get("active"), step=header.get("step"))
        out = [("loss", r["loss"])]
        out += [(f"grads.model.{n}", t) for n, t in r["grads_model"].items()]
        for l, rec in enumerate(r["grads_levels"]):
            out += [(f"grads.levels.{l}.{n}", t) for n, t in rec.items()]
        for l, rec in enumerate(r["error_buffers"]):
            out += [(f"error_buffers.{l}.{n}", t) for n, t in rec.items()]
        for l, rec in enumerate(r["context"]):
            out += [(f"context.{l}.{n}", t) for n, t in rec.items()]
        for l, y in enumerate(r["level_outputs"]):
            out.append((f"level_outputs.{l}", y))
        loss = float(r["loss"])
        return {"ok": True, "loss": loss if math.isfinite(loss) else None, "active": r["active"], "gates": r["gates"]}, out


class RequestError(ValueError):
    pass


# Requests whose handlers take decoded tensors: the stop-gap inner reference and the kernel host
# of the `py:` backend (docs/spec/py-backend.md).
TENSOR_OPS = ("inner", "kernel_load", "kernel_forward", "kernel_backward")


def _tensor_op(op: str):
    if op == "inner":
        from .ref_inner import handle_inner as fn
    else:
        from .kernel_host import OPS
        fn = OPS[op]
    return lambda header, tensors: fn(header, {n: _to_tensor(s, d) for n, (s, d) in tensors.items()})


def serve(inp, out) -> int:
    ch = Channel(inp, out)
    h = Handler()
    t0 = time.perf_counter()
    while True:
        msg = ch.read_message()
        if msg is None:
            log("stdin closed; exiting")
            return 0
        header, tensors, error = msg
        rid = header.get("id") if isinstance(header, dict) else None
        base = {"id": rid} if rid is not None else {}
        op = header.get("op") if isinstance(header, dict) else None
        if error is not None:
            ch.write({**base, "op": op, "ok": False, "error": error})
            continue
        t = time.perf_counter()
        try:
            if op == "shutdown":
                ch.write({**base, "op": op, "ok": True})
                log(f"shutdown after {time.perf_counter() - t0:.1f} s")
                return 0
            fn = {"hello": h.hello, "rule": h.rule, "model": h.model}.get(op)
            if fn is None and op in TENSOR_OPS:
                h.need_torch()
                fn = _tensor_op(op)
            if fn is None:
                raise RequestError(f"op: unknown op {op!r} (expected hello, rule, model, {', '.join(TENSOR_OPS)}, shutdown)")
            reply, out_tensors = fn(header, tensors)
        except (RequestError, ValueError) as e:
            reply, out_tensors = {"ok": False, "error": str(e)}, []
        except Exception as e:  # a bug here must not kill the process
            log(traceback.format_exc())
            reply, out_tensors = {"ok": False, "error": f"internal error: {type(e).__name__}: {e}"}, []
        reply = {**base, "op": op, **reply, "ms": (time.perf_counter() - t) * 1000}
        try:
            ch.write(reply, out_tensors)
        except ValueError as e:  # e.g. a non-finite number in the JSON header
            ch.write({**base, "op": op, "ok": False, "error": f"reply: {e}"})


def main() -> int:
    inp = sys.stdin.buffer
    # Anything that prints (a library warning, a stray print, a kernel under test writing to file
    # descriptor 1 from C) must not reach the protocol stream: the protocol gets a private copy of
    # the descriptor and descriptor 1 itself becomes stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(inp, out)


if __name__ == "__main__":
    sys.exit(main())
