"""A `py:` kernel's declaration (docs/spec/py-backend.md#contract): the callable the kernel host
imports, and its `nlc` dict read strictly (every key checked, a typo an error naming the nearest
known key): rules, dtypes, layouts, keywords, conventions, gate forms, token rows, outputs, chunk
sizes, packed batches, configurations. What the harness needs of it goes back in `kernel_load`'s
reply (`Kernel.describe`, `Kernel.conventions`); how the host calls the kernel by it is
kernel_calls.py.
"""
from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from typing import Dict, Optional

import torch

from .rules import META, TOKEN_ROWS
from . import configurations as configs
from . import triton_cpu

GATE_NAMES = ("alpha", "theta", "eta")


@contextlib.contextmanager
def as_shipped():
    """The kernel's own code (its module's import, its calls) runs as in a user's program: torch's
    default dtype float32, where the host itself runs in float64 (python/nlc_torch/bridge.py); restored
    after (docs/spec/py-backend.md#default-dtype). Without it a kernel allocating without a dtype mixes
    float64 into its f32 work and raises, or runs in float64: a verdict whose cause is the host."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(before)
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


def tb_tail(n: int = 6) -> str:
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
        parametrisation (raw q and k, g = log(1 - alpha)), made by the harness (conformance/kernel/conventions.ts)."""
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
        """What the harness needs to generate the kernel's inputs and map the references (conformance/kernel/conventions.ts)."""
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
            with as_shipped():
                spec.loader.exec_module(mod)
            return mod
        if path:
            for p in reversed(path.split(os.pathsep)):
                if p and p not in sys.path:
                    sys.path.insert(0, p)
        with as_shipped():
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
