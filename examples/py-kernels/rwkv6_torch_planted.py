"""rwkv6_torch.py's kernel with its bonus on reversed key channels (u flipped along K), declared as
the clean one: must fail (tests/py-per-head.test.ts). And the clean kernel declared without
`per_head`: the harness then sends u per token, [B, T, H, K], which the kernel cannot take as one
vector per head."""
from rwkv6_torch import RWKV6, _rwkv6

from nlc_torch import declared


def rwkv6_bonus_reversed(r, k, v, w, u, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None):
    return _rwkv6(r, k, v, w, u.flip(-1), scale, initial_state, output_final_state, cu_seqlens)


def rwkv6_not_per_head(r, k, v, w, u, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None):
    return _rwkv6(r, k, v, w, u, scale, initial_state, output_final_state, cu_seqlens)


rwkv6_bonus_reversed = declared(rwkv6_bonus_reversed, **RWKV6)
rwkv6_not_per_head = declared(rwkv6_not_per_head, **{k: v for k, v in RWKV6.items() if k != "per_head"})
