"""`tachyon plan`: memory plan for serving a model on one GPU (per tensor-parallel rank).

Per rank: weights = params x dtype bytes / tp; KV bytes/token = 2 x layers x kv_heads x head_dim x
kv-dtype bytes / tp (KV heads replicated when tp > kv_heads); activation reserve = a runtime
overhead (CUDA context, workspaces, graphs) + the peak activations of one `max_num_batched_tokens`
prefill chunk + fp32 logits of `max_num_seqs` rows. KV budget = gpu_mem x utilisation − weights −
reserve; it holds `kv_tokens` tokens = that many concurrent sequences x context. Estimates, meant to
be checked against the engine's own sizing after warm-up.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from tachyon.bench.shapes import DTYPE_BYTES, Shape, resolve_shape

GiB = 1024**3
RUNTIME_OVERHEAD = 1.0 * GiB


def parse_bytes(text: str) -> float:
    """'80GiB', '141GB', '80g', '512MiB' or a plain number of GiB -> bytes."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?)(i?)b?\s*", text.lower())
    if not m:
        raise ValueError(f"cannot parse a memory size from {text!r} (e.g. 80GiB, 141GB)")
    num, unit, binary = float(m.group(1)), m.group(2) or "g", m.group(3)
    base = 1024 if (binary or not text.lower().strip().endswith("b")) else 1000
    return num * base ** "kmgt".index(unit) * base


@dataclass
class Plan:
    model: str
    tp: int
    dtype: str
    kv_dtype: str
    gpu_mem_gib: float
    usable_gib: float
    params_b: float
    weights_gib: float
    kv_bytes_per_token: float
    activation_reserve_gib: float
    kv_budget_gib: float
    kv_tokens: int
    max_model_len: int
    max_seqs_at_full_context: int
    recommendation: str

    def as_dict(self) -> dict:
        return asdict(self)


def activation_reserve(shape: Shape, tp: int, act_bytes: float, max_batched_tokens: int,
                       max_num_seqs: int) -> float:
    per_token = (6 * shape.hidden + 3 * shape.intermediate / tp
                 + 2 * (shape.heads + 2 * shape.kv_heads) * shape.head_dim / tp) * act_bytes
    logits = max_num_seqs * shape.vocab * 4 * 2
    return RUNTIME_OVERHEAD + max_batched_tokens * per_token + logits


def make_plan(model: str, gpu_mem: str, dtype: str = "bfloat16", kv_dtype: str = "auto", tp: int = 1,
              max_model_len: int | None = None, gpu_memory_utilization: float = 0.9,
              max_num_batched_tokens: int = 2048, max_num_seqs: int = 256, block_size: int = 16) -> Plan:
    if tp < 1:
        raise ValueError(f"tp must be >= 1, got {tp}")
    shape = resolve_shape(model)
    wbytes = DTYPE_BYTES[dtype]
    kvb = DTYPE_BYTES[dtype if kv_dtype == "auto" else kv_dtype]
    act = DTYPE_BYTES[dtype] if DTYPE_BYTES[dtype] >= 2 else 2
    total = parse_bytes(gpu_mem)
    usable = total * gpu_memory_utilization
    weights = shape.num_params() * wbytes / tp
    per_tok = shape.kv_bytes_per_token(kvb, tp)
    reserve = activation_reserve(shape, tp, act, max_num_batched_tokens, max_num_seqs)
    budget = usable - weights - reserve
    kv_tokens = max(0, int(budget // per_tok) // block_size * block_size) if budget > 0 else 0
    L = max_model_len or shape.max_position
    seqs = kv_tokens // L
    rec = _recommend(shape, tp, weights, usable, reserve, kv_tokens, L, seqs, kv_dtype, max_num_seqs)
    return Plan(model, tp, dtype, kv_dtype if kv_dtype != "auto" else dtype, total / GiB, usable / GiB,
                shape.num_params() / 1e9, weights / GiB, per_tok, reserve / GiB, max(budget, 0) / GiB,
                kv_tokens, L, seqs, rec)


def _recommend(shape: Shape, tp: int, weights: float, usable: float, reserve: float, kv_tokens: int,
               L: int, seqs: int, kv_dtype: str, max_num_seqs: int) -> str:
    if weights + reserve >= usable:
        need = math.ceil(weights * tp / max(usable - reserve, 1))
        return (f"weights ({weights / GiB:.1f} GiB/rank) do not fit: use --tp {max(need, tp * 2)} "
                "or a quantized dtype (fp8/int8/int4)")
    if seqs < 1:
        hint = "" if kv_dtype.startswith("fp8") else ", --kv-dtype fp8"
        return (f"not even one {L}-token sequence fits ({kv_tokens} KV tokens): use --max-model-len "
                f"{kv_tokens // 16 * 16 or 16}{hint} or --tp {tp * 2}")
    avg = max(1, min(L, 2048) // 2)
    sugg = min(max_num_seqs, max(1, kv_tokens // avg))
    return (f"--max-model-len {L} --max-num-seqs {sugg}: {seqs} sequences at full context, about "
            f"{kv_tokens // avg} at {avg}-token average contexts; KV holds {kv_tokens} tokens")


def format_plan(p: Plan) -> str:
    rows = [("model", p.model), ("tensor parallel", p.tp), ("dtype / KV dtype", f"{p.dtype} / {p.kv_dtype}"),
            ("GPU memory", f"{p.gpu_mem_gib:.1f} GiB (usable {p.usable_gib:.1f})"),
            ("parameters", f"{p.params_b:.3f} B"), ("weights / rank", f"{p.weights_gib:.2f} GiB"),
            ("KV bytes / token / rank", f"{p.kv_bytes_per_token:,.0f} B"),
            ("activation reserve", f"{p.activation_reserve_gib:.2f} GiB"),
            ("KV budget", f"{p.kv_budget_gib:.2f} GiB = {p.kv_tokens:,} tokens"),
            ("max concurrent seqs x context", f"{p.max_seqs_at_full_context} x {p.max_model_len}"),
            ("recommendation", p.recommendation)]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)
