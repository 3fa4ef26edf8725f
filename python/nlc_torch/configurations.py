"""A kernel's configurations (docs/spec/py-backend.md#configurations): every autotune configuration
of every Triton kernel a call reaches, and the configurations a Python kernel declares
(`nlc['configurations']`), each judged as a kernel of its own.

Triton: `triton.runtime.autotuner.Autotuner.run` is replaced, once, by a run that never benchmarks.
A call uses each autotuned kernel's first configuration (after the kernel's own `early_config_prune`,
which drops configurations a shape cannot use), except the one kernel a request pins, which uses
the configuration pinned. Every autotuned kernel the call reaches is recorded with its candidate
configurations, so the reply names the configurations still to judge. One configuration is varied
at a time, the others at their first: a wrong configuration is found in the kernel it belongs to,
and the count stays the sum, not the product, of the kernels' configuration counts.

The interpreted path's support (bf16 arithmetic, loop variables) lives in triton_cpu.py.
"""
from __future__ import annotations

import sys
from typing import Dict, List, Optional, Tuple

# the kernels reached during the current request: name -> their candidate configurations, in order
_reached: Dict[str, List[Tuple[str, str]]] = {}
# (kernel name, configuration index) the current request pins, or None
_pin: Optional[Tuple[str, int]] = None
_installed = False
# the name of a call with every autotuned kernel at its first configuration
DEFAULT = "first of each autotuned kernel"


def describe(config) -> Tuple[str, str]:
    """A Triton Config as (its meta-parameters, its launch options), each the ones set."""
    meta = [f"{k}={v}" for k, v in config.kwargs.items()]
    launch = []
    for k in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        v = getattr(config, k, None)
        if v is not None and not (k == "num_ctas" and v == 1):
            launch.append(f"{k}={v}")
    return ", ".join(meta), ", ".join(launch)


# each autotuner's name, fixed when first seen: its function's name, qualified by its module where
# another autotuner already goes by that name
_names: Dict[int, str] = {}


def _name(tuner) -> str:
    key = id(tuner)
    if key not in _names:
        base = getattr(tuner, "base_fn", None) or getattr(tuner, "fn", None)
        name = getattr(base, "__name__", type(tuner).__name__)
        if name in _names.values():
            name = f"{getattr(base, '__module__', '?')}.{name}"
        _names[key] = name
    return _names[key]


def install() -> bool:
    """Replaces Autotuner.run where Triton is imported (by the kernel's module); False if it is not."""
    global _installed
    if _installed:
        return True
    mod = sys.modules.get("triton.runtime.autotuner")
    if mod is None:
        return False
    Autotuner = mod.Autotuner

    def run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        candidates = list(self.configs)
        if getattr(self, "early_config_prune", None):
            candidates = list(self.early_config_prune(self.configs, self.nargs, **kwargs)) or candidates
        name = _name(self)
        _reached.setdefault(name, [describe(c) for c in candidates])
        index = _pin[1] if _pin is not None and _pin[0] == name else 0
        if index >= len(candidates):
            raise ValueError(f"configuration {index} of {name}: this shape has {len(candidates)} candidate configurations")
        config = candidates[index]
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
        try:
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    Autotuner.run = run
    _installed = True
    return True


def parse(name: Optional[str]) -> Optional[Tuple[str, int]]:
    """`<kernel>#<index>` (a Triton configuration) -> (kernel, index); anything else -> None."""
    if not name or "#" not in name:
        return None
    kernel, _, rest = name.partition("#")
    index = rest.split(" ", 1)[0]
    return (kernel, int(index)) if index.isdigit() else None


class Request:
    """One request under one configuration: pins it for the duration, collects what was reached.

    `configuration`: None (the default: every kernel at its first configuration), a Triton
    configuration `<kernel>#<index> ...`, or one of the kernel's declared names."""

    def __init__(self, configuration: Optional[str]):
        self.configuration = configuration

    def __enter__(self):
        global _pin
        _reached.clear()
        _pin = parse(self.configuration)
        return self

    def __exit__(self, *exc):
        global _pin
        _pin = None
        return False

    @staticmethod
    def autotuned() -> int:
        """How many autotuned Triton kernels the request's call reached (0: none, or no Triton)."""
        return len(_reached)

    @staticmethod
    def others(collapse: bool = False) -> Tuple[List[str], int]:
        """The Triton configurations the request's call reached other than those it ran, one name
        each (`<kernel>#<index> (<meta-parameters>, <launch options>)`), and how many were left out
        as the same computation: with `collapse` (Triton's interpreter, which ignores launch
        options), a configuration whose meta-parameters equal an earlier one's of its kernel."""
        out: List[str] = []
        same = 0
        for kernel, cfgs in _reached.items():
            seen = {cfgs[0][0]} if cfgs else set()
            for i, (meta, launch) in enumerate(cfgs):
                if i == 0:
                    continue
                if collapse and meta in seen:
                    same += 1
                    continue
                seen.add(meta)
                out.append(f"{kernel}#{i} ({', '.join(x for x in (meta, launch) if x)})")
        return out, same


def declared(spec: str, decl: dict) -> Optional[List[str]]:
    """The configurations a Python kernel declares (nlc['configurations']): a non-empty list of
    distinct names, the first the default; it then takes them under the keyword `configuration`."""
    names = decl.get("configurations")
    if names is None:
        return None
    if (not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n and "#" not in n for n in names)
            or len(set(names)) != len(names)):
        raise ValueError(f"{spec}.nlc['configurations']: expected a non-empty list of distinct names (no '#'), the first "
                         f"the default, got {names!r} (docs/spec/py-backend.md#configurations)")
    return list(names)
