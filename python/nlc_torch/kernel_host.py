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
"""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from typing import Dict, List, Optional, Tuple

import torch

from .hazards import FillUnwritten, Guards, Plan, changed_elements, unwritten
from .rules import META, TOKEN_ROWS
from . import configurations as configs
from . import triton_cpu

GATE_NAMES = ("alpha", "theta", "eta")
# our inner input names (src/rules/types.ts INNER_INPUT_NAMES), as requests carry them (in.<name>)
INPUT_NAMES = ("k", "v", "q", "x", "p", "a", "b", "alpha", "theta", "eta", "omega")
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
# Judged against a plain run of their own precision (docs/spec/py-backend.md#precision); an f64
# kernel has no such yardstick short of ref64 itself and is skipped.
JUDGED_DTYPES = ("f32", "bf16", "f16")
STATE_DTYPES = ("f32", "bf16", "f16")
LAYOUTS = ("BTHD", "BHTD")
# Every key an `nlc` declaration may hold (docs/spec/py-backend.md#contract): any other is an error
# naming the nearest of these, so a typo never silently drops a declaration.
DECLARATION_KEYS = ("rules", "dtype", "state_dtype", "layout", "state_layout", "names", "initial_state", "state_dict",
                    "output_final_state", "chunk_size", "forward_only", "varlen", "scale", "absent", "log_gates",
                    "bounded", "qk_l2norm", "accumulate", "intermediates", "nondeterministic", "configurations",
                    "gate_forms", "constants", "input_dtypes", "head_dims", "token_rows", "outputs", "per_head")
# A gate the kernel computes from a raw input (docs/spec/py-backend.md#gate-forms): the forms, the gates each may stand for
GATE_FORMS = {"softplus": ("alpha",), "sigmoid": ("theta",), "sigmoid2": ("theta",)}
STATE_LAYOUTS = ("ours", "transposed")
# Where a rule's several rows per token sit in the kernel's tensors (docs/spec/py-backend.md#token-rows):
# "width" as ours ([B, T, H, n*d], a row gate [B, T, H, n]); "time": fla's, along the time axis
# ([B, T*n, H, d], a row gate [B, T*n, H]), token t's rows at t*n .. t*n + n - 1.
TOKEN_ROW_LAYOUTS = ("width", "time")


class KernelError(ValueError):
    """The kernel broke its contract or raised; the message names what and where."""


def _tb_tail(n: int = 6) -> str:
    lines = traceback.format_exc().strip().splitlines()
    return "\n".join(lines[-n:])


class Kernel:
    """A loaded kernel: the callable (the forward), its declaration and the optional explicit backward."""

    def __init__(self, spec: str, path: Optional[str]):
        self.spec = spec
        module, _, attr = spec.rpartition(":")
        if not module or not attr:
            raise KernelError(f"kernel: expected <module>:<callable>, got {spec!r}")
        mod = self._import(module, path)
        self.module_file: Optional[str] = getattr(mod, "__file__", None)
        self.fn = getattr(mod, attr, None)
        if self.fn is None:
            raise KernelError(f"kernel: module {module!r} has no attribute {attr!r}")
        if inspect.isclass(self.fn) and issubclass(self.fn, torch.autograd.Function):
            raise KernelError(f"kernel: {spec} is a torch.autograd.Function; name a function that calls its .apply "
                              "(autograd then reaches its backward)")
        if inspect.isclass(self.fn):  # a class is instantiated once, without arguments
            self.fn = self.fn()
        if not callable(self.fn):
            raise KernelError(f"kernel: {spec} is not callable")
        decl = getattr(self.fn, "nlc", None)
        if not isinstance(decl, dict):
            raise KernelError(f"kernel: {spec} has no `nlc` declaration dict (docs/spec/py-backend.md#contract)")
        for key in decl:
            if key not in DECLARATION_KEYS:
                near = difflib.get_close_matches(str(key), DECLARATION_KEYS, n=1, cutoff=0.6)
                hint = f"; did you mean {near[0]!r}?" if near else f" (known keys: {', '.join(DECLARATION_KEYS)})"
                raise KernelError(f"{spec}.nlc: unknown key {key!r}{hint} (docs/spec/py-backend.md#contract)")
        self.decl = decl
        # the module imported Triton: its autotuned kernels' configurations are enumerated and pinned,
        # and an interpreted run gets the CPU support (docs/spec/py-backend.md#configurations, #triton-cpu)
        configs.install()
        triton_cpu.install()
        try:
            self.configurations = configs.declared(spec, decl)
        except ValueError as e:
            raise KernelError(str(e)) from None
        if self.configurations is not None and not self.accepts_fn("configuration"):
            raise KernelError(f"{spec}.nlc['configurations'] declares configurations, but its forward takes no keyword "
                              "'configuration' (docs/spec/py-backend.md#configurations)")
        self.configuration: Optional[str] = None
        # the query scale one request calls the kernel with (a scale edge: docs/spec/py-backend.md#edges); None: the declared one
        self.scale_value: Optional[float] = None
        rules = decl.get("rules")
        if not isinstance(rules, (list, tuple)) or not all(isinstance(r, str) for r in rules) or not rules:
            raise KernelError(f"{spec}.nlc['rules']: expected a non-empty list of rule keys, got {rules!r}")
        self.rules = list(rules)
        self.dtype_name = decl.get("dtype", "f32")
        if self.dtype_name not in DTYPES:
            raise KernelError(f"{spec}.nlc['dtype']: expected one of {', '.join(DTYPES)}, got {self.dtype_name!r}")
        self.dtype = DTYPES[self.dtype_name]
        # linear-attention kernels keep the state in f32 whatever their storage dtype
        self.state_dtype_name = decl.get("state_dtype", "f32")
        if self.state_dtype_name not in STATE_DTYPES:
            raise KernelError(f"{spec}.nlc['state_dtype']: expected one of {', '.join(STATE_DTYPES)}, got {self.state_dtype_name!r}")
        self.state_dtype = DTYPES[self.state_dtype_name]
        self.layout = decl.get("layout", "BTHD")
        if self.layout not in LAYOUTS:
            raise KernelError(f"{spec}.nlc['layout']: expected one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        self.state_layout = decl.get("state_layout", "ours")
        if self.state_layout not in STATE_LAYOUTS:
            raise KernelError(f"{spec}.nlc['state_layout']: expected one of {', '.join(STATE_LAYOUTS)}, got {self.state_layout!r}")
        self.names: Dict[str, str] = dict(decl.get("names", {}))
        self.initial_state_kw = decl.get("initial_state", "initial_state")
        self._outputs(spec, decl)
        # a single-state rule's state travels as a bare tensor unless the kernel asks for a dict
        self.state_dict = bool(decl.get("state_dict", False))
        self.output_final_state_kw = decl.get("output_final_state")
        self._conventions(spec, decl)
        # the chunk sizes a chunked kernel hands its state across (docs/spec/py-backend.md#chunk-size)
        chunk = decl.get("chunk_size")
        chunks = [chunk] if isinstance(chunk, int) and not isinstance(chunk, bool) else chunk
        if chunks is not None and (not isinstance(chunks, (list, tuple)) or not chunks
                                   or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in chunks)):
            raise KernelError(f"{spec}.nlc['chunk_size']: expected a positive int or a list of them, got {chunk!r}")
        self.chunk_sizes = None if chunks is None else list(chunks)
        bw = getattr(self.fn, "backward", None)
        self.backward = bw if callable(bw) else None
        forward_only = decl.get("forward_only", False)
        if not isinstance(forward_only, bool):
            raise KernelError(f"{spec}.nlc['forward_only']: expected True or False, got {forward_only!r}")
        if forward_only and self.backward is not None:
            raise KernelError(f"{spec}.nlc['forward_only'] is True, but {spec} has an explicit backward")
        self.forward_only = forward_only
        # a kernel whose two runs of one case may differ (atomics, split reductions) says by how much
        # (docs/spec/hazards.md#determinism): {"tolerance": relative to each output's largest magnitude}
        nd = decl.get("nondeterministic", False)
        tol = nd.get("tolerance") if isinstance(nd, dict) else None
        if nd is not False and (not isinstance(nd, dict) or isinstance(tol, bool) or not isinstance(tol, (int, float))
                                or not 0 < tol < 1):
            raise KernelError(f"{spec}.nlc['nondeterministic']: expected {{'tolerance': <relative, in (0, 1)>}} or False, "
                              f"got {nd!r} (docs/spec/hazards.md#determinism)")
        self.tolerance: Optional[float] = None if nd is False else float(tol)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            self.params = None
        # packed variable-length batches (docs/spec/py-backend.md#packed): the keyword of the offsets
        varlen = decl.get("varlen", False)
        if not isinstance(varlen, (bool, str)) or varlen == "":
            raise KernelError(f"{spec}.nlc['varlen']: expected True (keyword 'cu_seqlens'), a keyword name or False, got {varlen!r}")
        self.varlen = "cu_seqlens" if varlen is True else (varlen or None)
        if self.varlen is not None and not self.accepts(self.varlen):
            raise KernelError(f"{spec}.nlc['varlen'] declares packed batches under the keyword {self.varlen!r}, "
                              "which its forward does not take (docs/spec/py-backend.md#packed)")

    def _conventions(self, spec: str, decl: dict) -> None:
        """The declared conventions (docs/spec/py-backend.md#conventions). The host only calls the
        kernel by them (keywords, flags); the values on the wire are already in the kernel's
        parametrisation (raw q and k, g = log(1 - alpha)), made by the harness (conformance/kernel/python/conventions.ts)."""
        scale = decl.get("scale")
        if isinstance(scale, dict):
            kw, value = scale.get("keyword"), scale.get("value", "rsqrt_dk")
            if kw is not None and not isinstance(kw, str):
                raise KernelError(f"{spec}.nlc['scale']['keyword']: expected a keyword name or None, got {kw!r}")
            if value != "rsqrt_dk" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise KernelError(f"{spec}.nlc['scale']['value']: expected 'rsqrt_dk' or a number, got {value!r}")
            scale = {"keyword": kw, "value": value}
        elif scale is not None and not isinstance(scale, (str, int, float)):
            raise KernelError(f"{spec}.nlc['scale']: expected a keyword name, a number or "
                              "{'keyword': ..., 'value': 'rsqrt_dk' | number}, got {scale!r}")
        self.scale = scale
        absent = decl.get("absent", [])
        if not isinstance(absent, (list, tuple)) or not all(isinstance(a, str) for a in absent):
            raise KernelError(f"{spec}.nlc['absent']: expected a list of input names (e.g. ['alpha']), got {absent!r}")
        self.absent = list(absent)
        log_gates = decl.get("log_gates", {})
        # alpha only: the kernel's decay is 1 - alpha, and g = log(1 - alpha) (docs/spec/py-backend.md#log-gates)
        if not isinstance(log_gates, dict) or not all(g == "alpha" and isinstance(kw, str) for g, kw in log_gates.items()):
            raise KernelError(f"{spec}.nlc['log_gates']: expected {{'alpha': <keyword>}}, e.g. {{'alpha': 'g'}} "
                              f"(the kernel takes g = log(1 - alpha)), got {log_gates!r}")
        self.log_gates: Dict[str, str] = dict(log_gates)
        bounded = decl.get("bounded", [])
        if not isinstance(bounded, (list, tuple)) or not all(b in GATE_NAMES for b in bounded):
            raise KernelError(f"{spec}.nlc['bounded']: expected a list of gates ({', '.join(GATE_NAMES)}), got {bounded!r}")
        self.bounded = list(bounded)
        l2 = decl.get("qk_l2norm", False)
        if not isinstance(l2, (bool, str)):
            raise KernelError(f"{spec}.nlc['qk_l2norm']: expected a keyword name (set to True) or a bool, got {l2!r}")
        self.qk_l2norm = l2
        acc = decl.get("accumulate")
        if acc is not None and acc not in ("f32", "f64", "tf32"):
            raise KernelError(f"{spec}.nlc['accumulate']: expected 'f32', 'f64' or 'tf32', got {acc!r}")
        if acc == "tf32" and self.dtype_name != "f32":
            raise KernelError(f"{spec}.nlc['accumulate']: 'tf32' (TF32 products of f32 tensors) needs dtype 'f32', got {self.dtype_name!r}")
        self.accumulate = acc
        inter = decl.get("intermediates")
        if inter is not None and inter != "storage":
            raise KernelError(f"{spec}.nlc['intermediates']: expected 'storage' (intermediates kept in the storage dtype) "
                              f"or absent, got {inter!r}")
        if inter is not None and decl.get("dtype", "f32") not in ("bf16", "f16"):
            raise KernelError(f"{spec}.nlc['intermediates']: 'storage' needs a bf16 or f16 dtype, the kernel declares "
                              f"{decl.get('dtype', 'f32')!r} (docs/spec/precision.md#intermediates)")
        self.intermediates = inter
        self._gate_forms(spec, decl)
        # gates the kernel takes once per head (docs/spec/py-backend.md#per-head): the harness sends them per
        # token, equal over the tokens and sequences of a head, and the kernel gets the first token's, [H] or [H, d]
        per_head = decl.get("per_head", [])
        if not isinstance(per_head, (list, tuple)) or not all(g in GATE_NAMES and g not in self.absent and g not in self.gate_forms
                                                             for g in per_head):
            raise KernelError(f"{spec}.nlc['per_head']: expected a list of gates ({', '.join(GATE_NAMES)}) neither absent nor "
                              f"in nlc['gate_forms'], e.g. ['theta'], got {per_head!r}")
        self.per_head = list(per_head)
        consts = decl.get("constants", {})
        # None: a keyword the kernel requires (no default) for what the harness does not use, e.g. fla's naive cu_seqlens
        if not isinstance(consts, dict) or not all(isinstance(c, str) and (v is None or isinstance(v, (bool, int, float, str)))
                                                   for c, v in consts.items()):
            raise KernelError(f"{spec}.nlc['constants']: expected {{keyword: bool | int | float | str | None}}, e.g. {{'state_v_first': False}}, "
                              f"got {consts!r}")
        self.constants: Dict[str, object] = dict(consts)
        dts = decl.get("input_dtypes", {})
        for n in dts if isinstance(dts, dict) else ():
            if n not in INPUT_NAMES:
                near = difflib.get_close_matches(str(n), INPUT_NAMES, n=1, cutoff=0.5)
                raise KernelError(f"{spec}.nlc['input_dtypes']: {n!r} is not an input name"
                                  + (f"; did you mean {near[0]!r}?" if near else f" (inputs: {', '.join(INPUT_NAMES)})"))
        if not isinstance(dts, dict) or not all(isinstance(n, str) and v in JUDGED_DTYPES for n, v in dts.items()):
            raise KernelError(f"{spec}.nlc['input_dtypes']: expected {{input: {' | '.join(repr(d) for d in JUDGED_DTYPES)}}}, "
                              f"e.g. {{'alpha': 'f32'}}, got {dts!r}")
        self.input_dtypes: Dict[str, str] = dict(dts)
        self.head_dims = decl.get("head_dims")
        if self.head_dims not in (None, "pow2"):
            raise KernelError(f"{spec}.nlc['head_dims']: expected 'pow2' (powers of two only) or absent, got {self.head_dims!r}")
        self._token_rows(spec, decl)

    def _outputs(self, spec: str, decl: dict) -> None:
        """The kernel's own names of what it returns, for messages only (docs/spec/py-backend.md#contract):
        {'y': <name>, <state>: <name of its final state>}, e.g. fla's {'y': 'o', 'M': 'final_state'}."""
        outs = decl.get("outputs", {})
        states = {n for r in self.rules for n in META.get(r.split(".")[0], {}).get("state", {})}
        if not isinstance(outs, dict) or not all(isinstance(n, str) and n in states | {"y"} and isinstance(v, str) and v
                                                 for n, v in outs.items()):
            raise KernelError(f"{spec}.nlc['outputs']: expected {{'y': <name>, <state>: <name>}} with the states of "
                              f"{', '.join(self.rules)} ({', '.join(sorted(states)) or 'none'}), e.g. {{'y': 'o', 'M': 'final_state'}}, "
                              f"got {outs!r}")
        self.outputs: Dict[str, str] = dict(outs)

    def _token_rows(self, spec: str, decl: dict) -> None:
        """Where the rows of a rule's several-rows-per-token inputs sit, and the keyword their count
        travels under (docs/spec/py-backend.md#token-rows): {'layout': 'width' | 'time', 'count': <keyword> | None}."""
        tr = decl.get("token_rows")
        self.token_rows: Optional[dict] = None
        if tr is None:
            return
        where = f"{spec}.nlc['token_rows']"
        if not isinstance(tr, dict):
            raise KernelError(f"{where}: expected {{'layout': {' | '.join(repr(x) for x in TOKEN_ROW_LAYOUTS)}, 'count': <keyword> | None}}, got {tr!r}")
        for key in tr:
            if key not in ("layout", "count"):
                raise KernelError(f"{where}: unknown key {key!r} (it takes 'layout' and 'count')")
        layout, count = tr.get("layout", "width"), tr.get("count")
        if layout not in TOKEN_ROW_LAYOUTS:
            raise KernelError(f"{where}['layout']: expected {' or '.join(repr(x) for x in TOKEN_ROW_LAYOUTS)}, got {layout!r}")
        if count is not None and (not isinstance(count, str) or not count):
            raise KernelError(f"{where}['count']: expected the keyword the row count is passed under (an int), or None, got {count!r}")
        plain = [r for r in decl.get("rules", []) if isinstance(r, str) and r.split(".")[0] not in TOKEN_ROWS]
        if plain:
            have = ", ".join(sorted(TOKEN_ROWS)) or "none"
            raise KernelError(f"{where}: the rule {plain[0]!r} has one row per token of every input; token_rows applies to "
                              f"the rules with several ({have})")
        self.token_rows = {"layout": layout, "count": count}

    def row_count(self, rule: str, name: str, cfg: dict) -> Optional[int]:
        """How many rows per token our input `name` has under `rule`; None where the rule does not list it in its token rows."""
        tr = TOKEN_ROWS.get(rule.split(".")[0])
        if tr is None or name not in tr["inputs"]:
            return None
        n = cfg.get(tr["hyper"])
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise KernelError(f"config.{tr['hyper']}: {rule} has {tr['hyper']} rows per token of {name}; expected a positive int, got {n!r}")
        return n

    def to_kernel_rows(self, t: torch.Tensor, n: Optional[int], gate: bool) -> torch.Tensor:
        """Our [B, T, H, n*d] (a row gate [B, T, H, n]) -> the kernel's rows; differentiable. n None: not a row input."""
        if self.token_rows is None or self.token_rows["layout"] == "width" or n is None:
            return t
        B, T, H = t.shape[:3]
        if gate:
            return t.permute(0, 1, 3, 2).reshape(B, T * n, H)
        return t.reshape(B, T, H, n, -1).permute(0, 1, 3, 2, 4).reshape(B, T * n, H, -1)

    def from_kernel_rows(self, t: torch.Tensor, n: Optional[int], gate: bool) -> torch.Tensor:
        """The inverse of to_kernel_rows (a kernel's own backward returns its gradients in its rows)."""
        if self.token_rows is None or self.token_rows["layout"] == "width" or n is None:
            return t
        B, Tn, H = t.shape[:3]
        if gate:
            return t.reshape(B, Tn // n, n, H).permute(0, 1, 3, 2)
        return t.reshape(B, Tn // n, n, H, -1).permute(0, 1, 3, 2, 4).reshape(B, Tn // n, H, -1)

    def rows_shape(self, canonical: List[int], n: Optional[int], gate: bool) -> List[int]:
        """The shape of one of our [B, T, H, w] tensors in the kernel's rows (before `layout`)."""
        if self.token_rows is None or self.token_rows["layout"] == "width" or n is None:
            return list(canonical)
        B, T, H, w = canonical
        return [B, T * n, H] if gate else [B, T * n, H, w // n]

    def _gate_forms(self, spec: str, decl: dict) -> None:
        """Gates the kernel computes from a raw input (docs/spec/py-backend.md#gate-forms): the form,
        the keywords that switch it on (`flag`, set True), a softplus gate's parameter keywords."""
        forms = decl.get("gate_forms", {})
        if not isinstance(forms, dict):
            raise KernelError(f"{spec}.nlc['gate_forms']: expected {{gate: {{'form': ..., 'flag': ...}}}}, got {forms!r}")
        self.gate_forms: Dict[str, dict] = {}
        for gate, f in forms.items():
            where = f"{spec}.nlc['gate_forms'][{gate!r}]"
            form = f.get("form") if isinstance(f, dict) else None
            if form not in GATE_FORMS:
                raise KernelError(f"{where}: expected {{'form': {' | '.join(repr(x) for x in GATE_FORMS)}, ...}}, got {f!r}")
            if gate not in GATE_FORMS[form]:
                raise KernelError(f"{where}: the form {form!r} stands for {', '.join(GATE_FORMS[form])}, not {gate!r}")
            if gate in decl.get("log_gates", {}) or gate in decl.get("bounded", []):
                raise KernelError(f"{where}: {gate} is also in nlc['log_gates'] or nlc['bounded']; a gate has one parametrisation")
            known = {"form", "flag", "A_log", "dt_bias"} if form == "softplus" else {"form", "flag"}
            for key in f:
                if key not in known:
                    raise KernelError(f"{where}: unknown key {key!r} (the form {form!r} takes {', '.join(sorted(known))})")
            flag = f.get("flag", [])
            flags = [flag] if isinstance(flag, str) else flag
            if not isinstance(flags, (list, tuple)) or not all(isinstance(x, str) and x for x in flags):
                raise KernelError(f"{where}['flag']: expected a keyword name or a list of them (each passed as True), got {flag!r}")
            entry = {"form": form, "flags": list(flags)}
            if form == "softplus":
                a_log, dt_bias = f.get("A_log"), f.get("dt_bias")
                if not isinstance(a_log, str) or not (dt_bias is None or isinstance(dt_bias, str)):
                    raise KernelError(f"{where}: a softplus gate names its parameters' keywords, "
                                      f"{{'A_log': 'A_log', 'dt_bias': 'dt_bias' | None}}, got {f!r}")
                entry.update({"A_log": a_log, "dt_bias": dt_bias})
            self.gate_forms[gate] = entry

    def keyword(self, name: str) -> str:
        """The keyword of one of our inputs: a log-space gate's own keyword, else its `names` entry."""
        return self.log_gates.get(name) or self.names.get(name, name)

    def conventions(self) -> dict:
        """What the harness needs to generate the kernel's inputs and map the references (conformance/kernel/python/conventions.ts)."""
        s = self.scale
        if isinstance(s, dict):
            scale = {"value": s["value"], "keyword": s["keyword"]}
        elif isinstance(s, str):
            scale = {"value": 1.0, "keyword": s}
        else:
            scale = {"value": 1.0, "keyword": None, "divided": float(s)} if s is not None else None
        forms = {g: {"form": f["form"], **({"A_log": f["A_log"], "dt_bias": f["dt_bias"]} if f["form"] == "softplus" else {})}
                 for g, f in self.gate_forms.items()}
        return {"absent": self.absent, "scale": scale, "log_gates": self.log_gates, "bounded": self.bounded,
                "qk_l2norm": bool(self.qk_l2norm), "accumulate": self.accumulate, "intermediates": self.intermediates,
                # the kernel's own names, for messages: our input -> its keyword, and its initial-state keyword
                "keywords": {**self.names, **self.log_gates}, "initial_state": self.initial_state_kw, "outputs": self.outputs,
                "state_dict": self.state_dict,
                "gate_forms": forms, "constants": self.constants, "input_dtypes": self.input_dtypes, "head_dims": self.head_dims,
                "token_rows": self.token_rows, "per_head": self.per_head}

    @staticmethod
    def _import(module: str, path: Optional[str]):
        if module.endswith(".py") or os.sep in module:
            file = os.path.abspath(module)
            if not os.path.isfile(file):
                raise KernelError(f"kernel: {file} does not exist")
            # the adaptor's own folder first, so it imports its sibling modules as a script would
            folder = os.path.dirname(file)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            name = "nlc_kernel_" + os.path.splitext(os.path.basename(file))[0]
            spec = importlib.util.spec_from_file_location(name, file)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            return mod
        if path:
            for p in reversed(path.split(os.pathsep)):
                if p and p not in sys.path:
                    sys.path.insert(0, p)
        return importlib.import_module(module)

    def accepts_fn(self, kw: str) -> bool:
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return True
        return kw in params or any(p.kind == p.VAR_KEYWORD for p in params.values())

    def accepts(self, kw: str) -> bool:
        if self.params is None:
            return True
        return kw in self.params or any(p.kind == p.VAR_KEYWORD for p in self.params.values())

    def describe(self) -> dict:
        judged = self.dtype_name in JUDGED_DTYPES
        return {
            "kernel": self.spec, "rules": self.rules, "dtype": self.dtype_name, "state_dtype": self.state_dtype_name, "layout": self.layout,
            "state_layout": self.state_layout, "backward": "none" if self.forward_only else "explicit" if self.backward else "autograd",
            "device": str(self.device) + (f" ({torch.cuda.get_device_name(0)})" if self.device.type == "cuda" else ""),
            "judged": judged, "conventions": self.conventions(), "chunk_sizes": self.chunk_sizes, "varlen": self.varlen,
            "nondeterministic": None if self.tolerance is None else {"tolerance": self.tolerance},
            "interpreted": triton_cpu.interpreted(), "configurations": self.configurations,
            "skip_reason": None if judged else
            f"{self.spec} declares dtype {self.dtype_name}; f32, bf16 and f16 kernels are judged (an f64 kernel's yardstick would be "
            "ref64 itself: docs/spec/py-backend.md#precision)",
        }

    # ── adapters: canonical <-> the kernel's conventions (all differentiable) ─────────────────

    def to_kernel_token(self, t: torch.Tensor) -> torch.Tensor:
        """[B, T, H, d] or gates [B, T, H] -> the kernel's layout."""
        return t.transpose(1, 2).contiguous() if self.layout == "BHTD" else t

    def from_kernel_token(self, t: torch.Tensor) -> torch.Tensor:
        return t.transpose(1, 2) if self.layout == "BHTD" else t

    def to_kernel_state(self, t: torch.Tensor) -> torch.Tensor:
        return t.transpose(-1, -2).contiguous() if self.state_layout == "transposed" else t

    def from_kernel_state(self, t: torch.Tensor) -> torch.Tensor:
        return t.transpose(-1, -2) if self.state_layout == "transposed" else t

    def kernel_shape(self, canonical: List[int], kind: str) -> List[int]:
        s = list(canonical)
        if kind == "token" and self.layout == "BHTD":
            s[1], s[2] = s[2], s[1]
        if kind == "state" and self.state_layout == "transposed":
            s[-1], s[-2] = s[-2], s[-1]
        return s

    def check_tensor(self, what: str, t, canonical: List[int], kind: str) -> torch.Tensor:
        want = self.kernel_shape(canonical, kind)
        if not isinstance(t, torch.Tensor):
            raise KernelError(f"{self.spec} returned {what} as {type(t).__name__}, expected a torch.Tensor of shape {want}")
        if list(t.shape) != want:
            raise KernelError(f"{self.spec} returned {what} of shape {list(t.shape)}, expected {want}")
        want_dtype, key, name = (self.state_dtype, "state_dtype", self.state_dtype_name) if kind == "state" else (self.dtype, "dtype", self.dtype_name)
        if t.dtype != want_dtype:
            raise KernelError(f"{self.spec} returned {what} as {t.dtype}, but declares {key} {name} ({want_dtype})")
        if t.device.type != self.device.type:
            raise KernelError(f"{self.spec} returned {what} on {t.device}, inputs were on {self.device}")
        return t


def _query_scale(k: Kernel, d_k: int) -> Tuple[Optional[str], Optional[float], float]:
    """(keyword to pass the scale to, or None; the value passed; the fixed factor the kernel applies
    to q that the host divides out, 1.0 if none). A declared {'keyword', 'value'} scale is the
    kernel's own: the harness has already scaled the reference's q (docs/spec/py-backend.md#scale)."""
    s = k.scale
    if isinstance(s, dict):
        if s["keyword"] is None:
            return None, None, 1.0
        if k.scale_value is not None:
            return s["keyword"], k.scale_value, 1.0
        return s["keyword"], (d_k ** -0.5 if s["value"] == "rsqrt_dk" else float(s["value"])), 1.0
    if isinstance(s, str):
        return s, (1.0 if k.scale_value is None else k.scale_value), 1.0
    if s is None:
        return None, None, 1.0
    return None, None, float(s)


def _kernel_inputs(k: Kernel, rule: str, inputs: Dict[str, torch.Tensor], factor: float,
                   cfg: Optional[dict] = None) -> Dict[str, torch.Tensor]:
    """Our inputs under the kernel's keywords. An input the kernel does not take must be declared
    absent (the harness then never sends it); one it neither takes nor declares is an error naming it.
    An input with several rows per token goes in the kernel's rows (`token_rows`)."""
    kw: Dict[str, torch.Tensor] = {}
    for name, t in inputs.items():
        key = k.keyword(name)
        if name in k.absent:
            raise KernelError(f"in.{name}: {k.spec} declares {name} absent, but the request carries it")
        if not k.accepts(key):
            raise KernelError(f"{k.spec} does not take the input {name} (keyword {key!r}) that {rule} reads; "
                              f"declare it in nlc['absent'] if the kernel has no such input, or its keyword in "
                              f"nlc['names'] if the kernel takes it under another name (docs/spec/py-backend.md#absent)")
        if name in k.per_head:
            # equal over the tokens and sequences of a head: the first token's, one per head (none: zeros)
            kw[key] = t[0, 0] if t.shape[1] > 0 else t.new_zeros(t.shape[2:])
            continue
        if name == "q" and factor != 1.0:
            t = t / factor  # the kernel multiplies q by `factor`; ours does not
        if k.token_rows is not None:
            t = k.to_kernel_rows(t, k.row_count(rule, name, cfg or {}), name in GATE_NAMES)
        kw[key] = k.to_kernel_token(t)
    return kw


def gate_params(H: int, d: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """A softplus gate's per-head parameters (docs/spec/py-backend.md#gate-forms; the harness maps with
    the same values, conformance/kernel/python/conventions.ts gateParams): A_log[h] = (h mod 4)/4 - 1/4,
    dt_bias[h, i] = ((h + i) mod 5 - 2)/8, f32 [H] and [H * d]; multiples of 1/8, exact in every dtype."""
    h = torch.arange(H, dtype=torch.float64)
    i = torch.arange(d, dtype=torch.float64)
    a_log = torch.remainder(h, 4) / 4 - 0.25
    dt_bias = (torch.remainder(h[:, None] + i[None, :], 5) - 2) / 8
    return a_log.to(torch.float32), dt_bias.reshape(-1).to(torch.float32)


def _flags(k: Kernel, kw: Dict[str, object], d_k: int, H: int = 1, rule: str = "", cfg: Optional[dict] = None) -> None:
    scale_kw, scale_value, _ = _query_scale(k, d_k)
    if scale_kw:
        kw[scale_kw] = scale_value
    if k.token_rows is not None and k.token_rows["count"] is not None and not rule.endswith(".frozen"):
        # the rows per token of the rule's row inputs (Gated DeltaProduct's n_h), an int
        kw[k.token_rows["count"]] = k.row_count(rule, TOKEN_ROWS[rule]["inputs"][0], cfg or {})
    if isinstance(k.qk_l2norm, str):
        kw[k.qk_l2norm] = True
    for f in k.gate_forms.values():
        for flag in f["flags"]:
            kw[flag] = True
        if f["form"] == "softplus":
            a_log, dt_bias = gate_params(H, d_k)
            kw[f["A_log"]] = a_log.to(k.device)
            if f["dt_bias"] is not None:
                kw[f["dt_bias"]] = dt_bias.to(k.device)
    for c, v in k.constants.items():
        if c in kw:
            raise KernelError(f"{k.spec}.nlc['constants'][{c!r}]: the keyword {c!r} is one the host passes itself "
                              "(an input, the state, a flag, the scale or a row count); declare it there")
        kw[c] = v


def _guard_labels(k: Kernel, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor], single: bool) -> Dict[str, str]:
    """The kernel's keyword of each tensor it receives -> our name of it (docs/spec/hazards.md#guards)."""
    labels = {k.keyword(n): n for n in inputs}
    labels[k.initial_state_kw] = f"state.{next(iter(state))}" if single else "state"
    return labels


def _call_forward(k: Kernel, rule: str, cfg: dict, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
                  cu_seqlens: Optional[torch.Tensor] = None, guards: Optional[Guards] = None):
    """Runs the forward on canonical-layout tensors (already on the device, in the kernel's
    dtype); returns (y, final state) canonical. Conversions stay in the autograd graph. A frozen
    read (`<rule>.frozen`) returns y alone; its state is unchanged, so the final state is None.
    `cu_seqlens`: a packed batch's offsets, passed under the kernel's `varlen` keyword."""
    frozen = rule.endswith(".frozen")
    d_k = inputs["q"].shape[-1]
    kw: Dict[str, object] = dict(_kernel_inputs(k, rule, inputs, _query_scale(k, d_k)[2], cfg))
    single = len(state) == 1 and not k.state_dict
    st = {n: k.to_kernel_state(t) for n, t in state.items()}
    kw[k.initial_state_kw] = next(iter(st.values())) if single else st
    if k.output_final_state_kw and not frozen:
        kw[k.output_final_state_kw] = True
    _flags(k, kw, d_k, inputs["q"].shape[2], rule, cfg)
    if len(k.rules) > 1:
        kw["rule"] = rule
    if cu_seqlens is not None:
        kw[k.varlen] = cu_seqlens
    if k.accepts("config"):
        kw["config"] = dict(cfg)
    if guards is not None:
        guards.wrap_all(kw, _guard_labels(k, inputs, state, single))
    if k.configurations is not None:
        kw["configuration"] = k.configuration or k.configurations[0]
    try:
        with FillUnwritten():
            out = k.fn(**kw)
    except Exception as e:
        sys.stderr.write(traceback.format_exc())
        raise KernelError(f"{k.spec} raised {type(e).__name__}: {e}\n{_tb_tail()}") from None
    B, T, H, d_out = inputs["q"].shape  # y_t is a read with q_t: one row of d per head
    if frozen:
        return k.from_kernel_token(k.check_tensor("y", out, [B, T, H, d_out], "token")), None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise KernelError(f"{k.spec} returned {type(out).__name__}, expected (y, final_state)")
    y, fin = out
    y = k.from_kernel_token(k.check_tensor("y", y, [B, T, H, d_out], "token"))
    if single:
        fin = {next(iter(state)): fin}
    if not isinstance(fin, dict):
        raise KernelError(f"{k.spec} returned the final state as {type(fin).__name__}, expected a dict by state name ({', '.join(state)})")
    final = {}
    for n, t0 in state.items():
        if n not in fin:
            raise KernelError(f"{k.spec} returned no final state '{n}'")
        final[n] = k.from_kernel_state(k.check_tensor(f"final state {n}", fin[n], list(t0.shape), "state"))
    return y, final


def _probe_call(k: Kernel, rule: str, cfg: dict, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
                cu_seqlens: Optional[torch.Tensor], writes: List[dict]):
    """One call of a probe, on copies of every tensor it hands the kernel (docs/spec/hazards.md#inputs):
    the request's own tensors are never the kernel's to write, and a write into a copy is recorded in
    `writes` as the judged run's guards record one (once per tensor)."""
    ins = {n: t.clone() for n, t in inputs.items()}
    st = {n: t.clone() for n, t in state.items()}
    out = _call_forward(k, rule, cfg, ins, st, cu_seqlens)
    single = len(state) == 1 and not k.state_dict
    seen = {w["tensor"] for w in writes}
    for label, src, copy, kw in ([(n, inputs[n], ins[n], k.keyword(n)) for n in inputs]
                                 + [(f"state.{n}", state[n], st[n], k.initial_state_kw if single else f"{k.initial_state_kw}.{n}")
                                    for n in state]):
        changed = changed_elements(src, copy)
        if changed and label not in seen:
            writes.append({"kind": "wrote-input", "tensor": label, "keyword": kw, "elements": changed, "of": src.numel()})
    return out


def _probe_ignored(k: Kernel, rule: str, cfg: dict, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
                   cu_seqlens: Optional[torch.Tensor] = None, writes: Optional[List[dict]] = None) -> bool:
    """Detects an input the kernel accepts (e.g. through **kwargs) but ignores
    (docs/spec/py-backend.md#absent): from the request's inputs and a random non-zero initial state,
    each input in turn is redrawn; if y and the final state stay bitwise the same, that input is
    ignored: an error naming it. Every call is on copies (`_probe_call`), its writes into them
    recorded in `writes`. Returns False when the probe cannot decide (d = 1, where a
    normalised key is ±1 whatever its value), so a later request probes again."""
    if rule.endswith(".frozen") or inputs["q"].shape[-1] < 2:
        return False
    writes = [] if writes is None else writes
    gen = torch.Generator().manual_seed(0x5EED)

    def draw(like: torch.Tensor, name: str) -> torch.Tensor:
        if name in GATE_NAMES:
            u = torch.rand(like.shape, generator=gen, dtype=torch.float64) * 0.8 + 0.1
            if name in k.log_gates:
                u = torch.log1p(-u)
            return u.to(like.device, like.dtype)
        return (torch.randn(like.shape, generator=gen, dtype=torch.float64) * 0.5).to(like.device, like.dtype)

    st = {n: draw(t, "state") for n, t in state.items()}
    with torch.no_grad():
        y0, f0 = _probe_call(k, rule, cfg, inputs, st, cu_seqlens, writes)
        for name in inputs:
            changed = dict(inputs)
            changed[name] = draw(inputs[name], name)
            y1, f1 = _probe_call(k, rule, cfg, changed, st, cu_seqlens, writes)
            if torch.equal(y0, y1) and all(torch.equal(f0[n], f1[n]) for n in f0):
                raise KernelError(f"{k.spec} accepts the input {name} (keyword {k.keyword(name)!r}) but ignores it: y and the final "
                                  f"state are bitwise unchanged when {name} is redrawn. Either the rule's operation truly does not "
                                  f"read {name}: declare it in nlc['absent']; or the kernel should read it and does not (it reads "
                                  f"another input where {name} belongs, or none): a bug in the kernel (docs/spec/py-backend.md#absent)")
    return True


class KernelHost:
    def __init__(self):
        self.kernels: Dict[str, Kernel] = {}
        self.probed = set()

    def _probe(self, k: Kernel, rule: str, cfg: dict, inputs, state, cu_seqlens=None) -> List[dict]:
        """The ignored-input probe, once per kernel and rule, on copies of the request's tensors; the writes
        it saw into them (the request's hazards, docs/spec/hazards.md#inputs)."""
        key = (k.spec, rule)
        writes: List[dict] = []
        if key not in self.probed and _probe_ignored(k, rule, cfg, inputs, state, cu_seqlens, writes):
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
                raise KernelError(f"importing {spec} failed: {type(e).__name__}: {e}\n{_tb_tail()}") from None
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
        return rule, cfg, inputs, state, extra, _cu_seqlens(k, header.get("cu_seqlens"), inputs["q"], state, batched)

    def forward(self, header, tensors):
        k = self.get(header)
        if header.get("contract") is not None:
            return self._contract(k, header, tensors)
        rule, cfg, inputs, state, _, cu = self._prepare(k, header, tensors)
        probed = self._probe(k, rule, cfg, inputs, state, cu)
        guards = Guards(Plan(header.get("hazards")))
        with _configured(k, header) as reply, torch.no_grad():
            y, final = _call_forward(k, rule, cfg, inputs, state, cu, guards)
        out = [("y", y)] + [(f"state.{n}", t) for n, t in (final or {}).items()]
        return {"ok": True, **reply, **_observed(guards, probed, _unwritten_outputs(out, cu))}, out

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
                y, _ = _call_forward(k, rule, cfg, inputs, state, cu)
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
            grads = self._backward(k, rule, cfg, inputs, state, dy, d_state, cu, guards, forward)
        out = [(f"grads.{n}", g) for n, g in grads.items()]
        return ({"ok": True, "backward": "explicit" if k.backward else "autograd", **reply,
                 **_observed(guards, probed, _unwritten_outputs(forward + out, cu))}, out)

    @staticmethod
    def _backward(k: Kernel, rule, cfg, inputs, state, dy, d_state, cu, guards,
                  forward: Optional[List[Tuple[str, torch.Tensor]]] = None) -> Dict[str, torch.Tensor]:
        """The gradients; `forward` receives the outputs of the forward an autograd backward runs (y, final states)."""
        if k.backward is not None:
            grads = _explicit_backward(k, rule, cfg, inputs, state, dy, d_state, cu, guards)
        else:
            leaves = {n: t.clone().requires_grad_(True) for n, t in inputs.items()}
            st0 = {n: t.clone().requires_grad_(True) for n, t in state.items()}
            with torch.enable_grad():
                y, final = _call_forward(k, rule, cfg, leaves, st0, cu, guards)
                if forward is not None:
                    forward.extend([("y", y)] + [(f"state.{n}", t) for n, t in (final or {}).items()])
                loss = (y * dy).sum() if dy is not None else y.sum() * 0
                for n, g in d_state.items():
                    loss = loss + (final[n] * g).sum()
                order = list(leaves.items()) + [(f"state.{n}", t) for n, t in st0.items()]
                try:
                    with FillUnwritten():  # an autograd Function's backward allocates here
                        gs = torch.autograd.grad(loss, [t for _, t in order], allow_unused=True)
                except Exception as e:
                    sys.stderr.write(traceback.format_exc())
                    raise KernelError(f"{k.spec}: autograd of the forward failed: {type(e).__name__}: {e}") from None
            grads = {n: torch.zeros_like(t) if g is None else g for (n, t), g in zip(order, gs)}
        return grads


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


def _observed(guards: Guards, probed: Optional[List[dict]] = None, unwritten_: Optional[List[dict]] = None) -> dict:
    """What the reply header says of the call (docs/spec/hazards.md): the writes into the inputs or
    their guards (the judged call's, then those the request's probe made into its copies of them),
    the outputs left unwritten, the tensors guarded and the kernel's keyword of each."""
    hazards = guards.check()
    seen = {(h["kind"], h["tensor"]) for h in hazards}
    hazards += [w for w in probed or [] if (w["kind"], w["tensor"]) not in seen]
    return {"hazards": hazards + list(unwritten_ or []), "guarded": guards.labels, "keywords": guards.keywords}


def _unwritten_outputs(out: List[Tuple[str, torch.Tensor]], cu_seqlens: Optional[torch.Tensor]) -> List[dict]:
    """The outputs (reply names, canonical layout) with elements still holding the fill of memory the
    kernel allocated (docs/spec/hazards.md#unwritten): per tensor how many, and the sequences n = b·H + h
    (a packed batch's b: the sequence whose tokens they are) where they lie."""
    found: List[dict] = []
    cu = None if cu_seqlens is None else cu_seqlens.tolist()
    for name, t in out:
        mask = unwritten(t.detach())
        if mask.dim() < 2 or not bool(mask.any()):
            continue
        token = name == "y" or (name.startswith("grads.") and not name.startswith("grads.state."))
        mask = mask.cpu()
        if token:  # [B, T, H, ...] -> (b, t, h) with an unwritten element
            B, T, H = mask.shape[:3]
            at = mask.reshape(B, T, H, -1).any(-1).nonzero()
            lead = at[:, 0] if cu is None else torch.bucketize(at[:, 1], torch.tensor(cu[1:]), right=True)
        else:  # [N, H, ...]
            H = mask.shape[1]
            at = mask.reshape(mask.shape[0], H, -1).any(-1).nonzero()
            lead = at[:, 0]
        seqs = sorted(set((lead * H + at[:, 2 if token else 1]).tolist()))
        found.append({"kind": "unwritten", "tensor": name, "elements": int(mask.sum()), "of": t.numel(), "seqs": seqs})
    return found


# The contract probe that sends a packed batch with B = 2 (docs/spec/py-backend.md#contracts).
CONTRACT_BATCHED_CU_SEQLENS = "batch_with_cu_seqlens"


def _cu_seqlens(k: Kernel, cu, q: torch.Tensor, state: Dict[str, torch.Tensor], batched: bool = False) -> Optional[torch.Tensor]:
    """A packed batch's offsets from the request header (docs/spec/py-backend.md#packed) as the int64
    tensor flash-linear-attention's kernels take, on the kernel's device; None for an unpacked batch.
    `batched`: the contract probe, whose B > 1 is the point."""
    if cu is None:
        return None
    if k.varlen is None:
        raise KernelError(f"cu_seqlens: {k.spec} declares no nlc['varlen'], but the request is a packed batch")
    B, T = q.shape[0], q.shape[1]
    # equal offsets are an empty sequence (docs/spec/py-backend.md#edges); decreasing ones are refused
    if (not isinstance(cu, list) or len(cu) < 2 or not all(isinstance(c, int) and not isinstance(c, bool) for c in cu)
            or cu[0] != 0 or cu[-1] != T or any(b < a for a, b in zip(cu, cu[1:])) or (B != 1 and not batched)):
        raise KernelError(f"cu_seqlens: expected offsets non-decreasing from 0 to T = {T} with B = 1, got {cu!r} (B = {B})")
    for n, t in state.items():
        if t.shape[0] != len(cu) - 1:
            raise KernelError(f"state.{n}: a packed batch of {len(cu) - 1} sequences has one state each, got {list(t.shape)}")
    return torch.tensor(cu, dtype=torch.long, device=k.device)


def _explicit_backward(k: Kernel, rule, cfg, inputs, state, dy, d_state, cu_seqlens=None,
                       guards: Optional[Guards] = None) -> Dict[str, torch.Tensor]:
    """The kernel's own backward: called with the forward's keywords plus `dy` and `d_final_state`;
    returns a dict of gradients by the kernel's keyword names (initial state under its keyword)."""
    d_k = inputs["q"].shape[-1]
    factor = _query_scale(k, d_k)[2]
    kw: Dict[str, object] = dict(_kernel_inputs(k, rule, inputs, factor, cfg))
    single = len(state) == 1 and not k.state_dict
    st = {n: k.to_kernel_state(t) for n, t in state.items()}
    kw[k.initial_state_kw] = next(iter(st.values())) if single else st
    _flags(k, kw, d_k, inputs["q"].shape[2], rule, cfg)
    if len(k.rules) > 1:
        kw["rule"] = rule
    if cu_seqlens is not None:
        kw[k.varlen] = cu_seqlens
    if k.configurations is not None:
        kw["configuration"] = k.configuration or k.configurations[0]
    kw["dy"] = k.to_kernel_token(dy) if dy is not None else None
    ds = {n: k.to_kernel_state(t) for n, t in d_state.items()}
    kw["d_final_state"] = (next(iter(ds.values())) if ds else None) if single else (ds or None)
    if guards is not None:
        labels = _guard_labels(k, inputs, state, single)
        labels.update({"dy": "dy", "d_final_state": f"dstate.{next(iter(state))}" if single else "dstate"})
        guards.wrap_all(kw, labels)
    try:
        with FillUnwritten():
            out = k.backward(**kw)
    except Exception as e:
        sys.stderr.write(traceback.format_exc())
        raise KernelError(f"{k.spec}.backward raised {type(e).__name__}: {e}\n{_tb_tail()}") from None
    if not isinstance(out, dict):
        raise KernelError(f"{k.spec}.backward returned {type(out).__name__}, expected a dict of gradients by keyword name")
    grads: Dict[str, torch.Tensor] = {}
    for name, t in inputs.items():
        key = k.keyword(name)
        g = out.get(key)
        if g is None:
            grads[name] = torch.zeros_like(t)
            continue
        n = k.row_count(rule, name, cfg or {}) if k.token_rows is not None else None
        gate = name in GATE_NAMES
        g = k.from_kernel_token(k.check_tensor(f"gradient {key}", g, k.rows_shape(list(t.shape), n, gate), "token"))
        g = k.from_kernel_rows(g, n, gate)
        grads[name] = g / factor if name == "q" and factor != 1.0 else g
    g0 = out.get(k.initial_state_kw)
    if not single and g0 is not None and not isinstance(g0, dict):
        raise KernelError(f"{k.spec}.backward returned {k.initial_state_kw} as {type(g0).__name__}, expected a dict by state name")
    for n, t in state.items():
        g = g0 if single else (g0 or {}).get(n)
        grads[f"state.{n}"] = torch.zeros_like(t) if g is None else k.from_kernel_state(
            k.check_tensor(f"gradient {k.initial_state_kw}{'' if single else '.' + n}", g, list(t.shape), "state"))
    return grads


HOST = KernelHost()
OPS = {"kernel_load": HOST.load, "kernel_forward": HOST.forward, "kernel_backward": HOST.backward}
