"""The kernel host: runs a PyTorch or Triton kernel pair under test (`--backend py:<module>:<callable>`)
behind the bridge protocol (python/PROTOCOL.md, requests kernel_load / kernel_forward /
kernel_backward). The contract of the kernel object: docs/spec/py-backend.md#contract (kernel object).

Tensors travel in OUR canonical layout (per-token [B, T, H, d], gates [B, T, H], states
[B, H, rows, cols] as the reference stores them, f64 on the wire). The host moves them to the
kernel's device and dtype and through the adapters the kernel declares (layout, transposed
states, query scale, keyword names), so every conversion is part of the autograd graph and the
gradients come back in the canonical layout without hand-written inverses.

Whatever the kernel does wrong (raises, returns a wrong shape/dtype/device, a non-tensor) is an
answer `{"ok": false, "error": ...}` that names the tensor; a kernel that kills or hangs the
process is handled by the client (timeout, stderr tail).

This module is the host's requests (the kernels loaded, each request's configuration, the
toolchain); the rest is kernel_declaration.py (the `nlc` declaration), kernel_layout.py (our
tensors <-> the kernel's), kernel_calls.py (the forward and backward calls) and kernel_probes.py
(the ignored-input probe, unwritten outputs, the hazards a reply reports).
"""
from __future__ import annotations

import os
import sys
import traceback
from typing import Dict, List, Tuple

import torch

from .hazards import Guards, Plan
from .kernel_calls import CONTRACT_BATCHED_CU_SEQLENS, call_backward, call_forward, packed_offsets
from .kernel_declaration import DTYPES, JUDGED_DTYPES, Kernel, KernelError, tb_tail
from .kernel_probes import observed, probe_ignored, unwritten_outputs
from . import configurations as configs
from . import triton_cpu


class KernelHost:
    def __init__(self):
        self.kernels: Dict[str, Kernel] = {}
        self.probed = set()

    def _probe(self, k: Kernel, rule: str, cfg: dict, inputs, state, cu_seqlens=None) -> List[dict]:
        """The ignored-input probe, once per kernel and rule, on copies of the request's tensors; the writes
        it saw into them (the request's hazards, docs/spec/hazards.md#inputs)."""
        key = (k.spec, rule)
        writes: List[dict] = []
        if key not in self.probed and probe_ignored(k, rule, cfg, inputs, state, cu_seqlens, writes):
            self.probed.add(key)
        return writes

    def get(self, header: dict) -> Kernel:
        spec = header.get("kernel")
        if not isinstance(spec, str):
            raise KernelError("kernel: expected '<module>:<callable>'")
        if spec not in self.kernels:
            try:
                self.kernels[spec] = Kernel(spec, header.get("path"))
            except KernelError:
                raise
            except BaseException as e:  # an import that fails (or exits) is the kernel's problem
                sys.stderr.write(traceback.format_exc())
                raise KernelError(f"importing {spec} failed: {type(e).__name__}: {e}\n{tb_tail()}") from None
        return self.kernels[spec]

    def load(self, header, tensors):
        k = self.get(header)
        return {"ok": True, **k.describe(), "torch": torch.__version__, "toolchain": _toolchain(k)}, []

    def _prepare(self, k: Kernel, header, tensors):
        rule = header.get("rule")
        if rule not in k.rules:
            raise KernelError(f"rule: {k.spec} does not implement {rule!r} (it declares {', '.join(k.rules)})")
        if k.dtype_name not in JUDGED_DTYPES:
            raise KernelError(k.describe()["skip_reason"])
        cfg = header.get("config") or {}
        inputs, state, extra = {}, {}, {}
        for name, t in tensors.items():
            # the values arrive already rounded to these dtypes (f64 on the wire): the casts are exact
            is_state = name.startswith("state.") or name.startswith("dstate.")
            dtype = k.state_dtype if is_state else DTYPES[k.input_dtypes[name[3:]]] if name[3:] in k.input_dtypes and name.startswith("in.") else k.dtype
            t = t.to(device=k.device, dtype=dtype)
            if name.startswith("in."):
                inputs[name[3:]] = t
            elif name.startswith("state."):
                state[name[6:]] = t
            else:
                extra[name] = t
        for n in (("q",) if rule.endswith(".frozen") else ("k", "q")):  # Atlas reads no v; a frozen read only q
            if n not in inputs:
                raise KernelError(f"in.{n}: missing")
        batched = header.get("contract") == CONTRACT_BATCHED_CU_SEQLENS
        return rule, cfg, inputs, state, extra, packed_offsets(k, header.get("cu_seqlens"), inputs["q"], state, batched)

    def forward(self, header, tensors):
        k = self.get(header)
        if header.get("contract") is not None:
            return self._contract(k, header, tensors)
        rule, cfg, inputs, state, _, cu = self._prepare(k, header, tensors)
        probed = self._probe(k, rule, cfg, inputs, state, cu)
        guards = Guards(Plan(header.get("hazards")))
        with _configured(k, header) as reply, torch.no_grad():
            y, final = call_forward(k, rule, cfg, inputs, state, cu, guards)
        out = [("y", y)] + [(f"state.{n}", t) for n, t in (final or {}).items()]
        return {"ok": True, **reply, **observed(guards, probed, unwritten_outputs(out, cu))}, out

    def _contract(self, k: Kernel, header, tensors):
        """A contract probe (docs/spec/py-backend.md#contracts): the forward called with what the kernel
        must refuse. The reply's `refused` is the first line of what the kernel raised, or None where it
        returned; `returned`: what it returned instead (a result, or the host's complaint about it)."""
        contract = header.get("contract")
        if contract != CONTRACT_BATCHED_CU_SEQLENS:
            raise KernelError(f"contract: expected {CONTRACT_BATCHED_CU_SEQLENS!r}, got {contract!r}")
        rule, cfg, inputs, state, _, cu = self._prepare(k, header, tensors)
        with _configured(k, header) as reply, torch.no_grad():
            try:
                y, _ = call_forward(k, rule, cfg, inputs, state, cu)
            except KernelError as e:
                first = str(e).split("\n")[0]
                if first.startswith(f"{k.spec} raised "):
                    return {"ok": True, **reply, "refused": first[len(k.spec) + 1:]}, []
                return {"ok": True, **reply, "refused": None, "returned": first}, []
        return {"ok": True, **reply, "refused": None, "returned": f"y of shape {list(y.shape)}"}, []

    def backward(self, header, tensors):
        k = self.get(header)
        rule, cfg, inputs, state, extra, cu = self._prepare(k, header, tensors)
        probed = self._probe(k, rule, cfg, inputs, state, cu)
        dy = extra.get("dy")
        d_state = {n[7:]: t for n, t in extra.items() if n.startswith("dstate.")}
        guards = Guards(Plan(header.get("hazards")))
        forward: List[Tuple[str, torch.Tensor]] = []
        with _configured(k, header) as reply:
            grads = call_backward(k, rule, cfg, inputs, state, dy, d_state, cu, guards, forward)
        out = [(f"grads.{n}", g) for n, g in grads.items()]
        return ({"ok": True, "backward": "explicit" if k.backward else "autograd", **reply,
                 **observed(guards, probed, unwritten_outputs(forward + out, cu))}, out)


class _configured:
    """A request under the configuration its header names (`configuration`: absent or null for the
    default, docs/spec/py-backend.md#configurations); the reply's `configurations` lists the
    configurations of this request's kernel other than the one run: the declared ones, or every
    autotune configuration of every Triton kernel the call reached."""

    def __init__(self, k: Kernel, header: dict):
        name = header.get("configuration")
        if name is not None and not isinstance(name, str):
            raise KernelError(f"configuration: expected a configuration's name or null, got {name!r}")
        if name is not None and k.configurations is not None and name not in k.configurations:
            raise KernelError(f"configuration: {k.spec} declares no configuration {name!r} (it declares {', '.join(k.configurations)})")
        if name is not None and k.configurations is None and configs.parse(name) is None:
            raise KernelError(f"configuration: {name!r} is not a Triton configuration '<kernel>#<index>'")
        scale = header.get("scale")
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0):
            raise KernelError(f"scale: expected a positive number or absent, got {scale!r}")
        if scale is not None and not (isinstance(k.scale, str) or (isinstance(k.scale, dict) and k.scale["keyword"] is not None)):
            raise KernelError(f"scale: {k.spec} takes no query scale by keyword, so the request cannot choose one")
        self.scale = None if scale is None else float(scale)
        self.k, self.name = k, name
        self.request = configs.Request(None if k.configurations is not None else name)
        self.reply: dict = {}

    def __enter__(self) -> dict:
        # a module may import Triton only when first called: both are installed as soon as it has
        configs.install()
        triton_cpu.install()
        self.k.configuration = self.name
        self.k.scale_value = self.scale
        self.request.__enter__()
        return self.reply

    def __exit__(self, *exc):
        self.k.configuration = None
        self.k.scale_value = None
        if self.k.configurations is not None:
            self.reply["configuration"] = self.name or self.k.configurations[0]
            self.reply["configurations"] = self.k.configurations[1:]
        else:
            if configs.install():  # Triton imported: a Triton kernel's default
                self.reply["configuration"] = self.name or configs.DEFAULT
            names, same = configs.Request.others(collapse=triton_cpu.interpreted())
            self.reply["configurations"] = names
            # 0: none to judge beyond the default, told apart from not looked at (docs/spec/py-backend.md#configurations)
            self.reply["autotuned"] = configs.Request.autotuned()
            if same:
                self.reply["configurations_same"] = same
        self.request.__exit__(*exc)
        return False


def _toolchain(k: Kernel) -> dict:
    """What runs the kernel (docs/spec/conformance.md#toolchain): torch, Triton, CUDA, driver, GPU,
    the compiler torch was built with, Python, and the hash of the kernel's module file. Absent
    fields do not apply or could not be found."""
    import hashlib
    import platform
    import re
    from importlib import metadata

    t = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        t["triton"] = metadata.version("triton")
    except Exception:
        pass
    if torch.version.cuda:
        t["cuda"] = torch.version.cuda
    if k.device.type == "cuda":
        t["gpu"] = torch.cuda.get_device_name(0)
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", f.read())
            if m:
                t["driver"] = m.group(1)
    except OSError:
        pass
    m = re.search(r"^\s*-\s*((?:GCC|clang|MSVC)[^\n]*)$", torch.__config__.show(), re.M)
    if m:
        t["compiler"] = m.group(1).strip()
    if k.module_file and os.path.isfile(k.module_file):
        t["file"] = k.module_file
        with open(k.module_file, "rb") as f:
            t["sha256"] = hashlib.sha256(f.read()).hexdigest()[:16]
    return t


HOST = KernelHost()
OPS = {"kernel_load": HOST.load, "kernel_forward": HOST.forward, "kernel_backward": HOST.backward}
