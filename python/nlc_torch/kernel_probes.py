"""What the kernel host finds out about a call beyond its outputs (docs/spec/hazards.md): the
ignored-input probe (an input the kernel accepts and never reads, docs/spec/py-backend.md#absent),
run on copies of the request's tensors so that a kernel writing its inputs is recorded and never
corrupts the judged call (docs/spec/hazards.md#inputs); the outputs left unwritten
(docs/spec/hazards.md#unwritten); and what the reply header says of both and of the guards.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch

from .hazards import Guards, changed_elements, unwritten
from .kernel_calls import call_forward
from .kernel_declaration import GATE_NAMES, Kernel, KernelError


def probe_call(k: Kernel, rule: str, cfg: dict, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
               cu_seqlens: Optional[torch.Tensor], writes: List[dict]):
    """One call of a probe, on copies of every tensor it hands the kernel (docs/spec/hazards.md#inputs):
    the request's own tensors are never the kernel's to write, and a write into a copy is recorded in
    `writes` as the judged run's guards record one (once per tensor)."""
    ins = {n: t.clone() for n, t in inputs.items()}
    st = {n: t.clone() for n, t in state.items()}
    out = call_forward(k, rule, cfg, ins, st, cu_seqlens)
    single = len(state) == 1 and not k.state_dict
    seen = {w["tensor"] for w in writes}
    for label, src, copy, kw in ([(n, inputs[n], ins[n], k.keyword(n)) for n in inputs]
                                 + [(f"state.{n}", state[n], st[n], k.initial_state_kw if single else f"{k.initial_state_kw}.{n}")
                                    for n in state]):
        changed = changed_elements(src, copy)
        if changed and label not in seen:
            writes.append({"kind": "wrote-input", "tensor": label, "keyword": kw, "elements": changed, "of": src.numel()})
    return out


def probe_ignored(k: Kernel, rule: str, cfg: dict, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
                  cu_seqlens: Optional[torch.Tensor] = None, writes: Optional[List[dict]] = None) -> bool:
    """Detects an input the kernel accepts (e.g. through **kwargs) but ignores
    (docs/spec/py-backend.md#absent): from the request's inputs and a random non-zero initial state,
    each input in turn is redrawn; if y and the final state stay bitwise the same, that input is
    ignored: an error naming it. Every call is on copies (`probe_call`), its writes into them
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
        y0, f0 = probe_call(k, rule, cfg, inputs, st, cu_seqlens, writes)
        for name in inputs:
            changed = dict(inputs)
            changed[name] = draw(inputs[name], name)
            y1, f1 = probe_call(k, rule, cfg, changed, st, cu_seqlens, writes)
            if torch.equal(y0, y1) and all(torch.equal(f0[n], f1[n]) for n in f0):
                raise KernelError(f"{k.spec} accepts the input {name} (keyword {k.keyword(name)!r}) but ignores it: y and the final "
                                  f"state are bitwise unchanged when {name} is redrawn. Either the rule's operation truly does not "
                                  f"read {name}: declare it in nlc['absent']; or the kernel should read it and does not (it reads "
                                  f"another input where {name} belongs, or none): a bug in the kernel (docs/spec/py-backend.md#absent)")
    return True


def observed(guards: Guards, probed: Optional[List[dict]] = None, unwritten_: Optional[List[dict]] = None) -> dict:
    """What the reply header says of the call (docs/spec/hazards.md): the writes into the inputs or
    their guards (the judged call's, then those the request's probe made into its copies of them),
    the outputs left unwritten, the tensors guarded and the kernel's keyword of each."""
    hazards = guards.check()
    seen = {(h["kind"], h["tensor"]) for h in hazards}
    hazards += [w for w in probed or [] if (w["kind"], w["tensor"]) not in seen]
    return {"hazards": hazards + list(unwritten_ or []), "guarded": guards.labels, "keywords": guards.keywords}


def unwritten_outputs(out: List[Tuple[str, torch.Tensor]], cu_seqlens: Optional[torch.Tensor]) -> List[dict]:
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
