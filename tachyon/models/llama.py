"""One decoder for Llama 2/3, Mistral, SmolLM2, Qwen2/2.5 (qkv bias) and Qwen3 (per-head q/k norm).

The model sees one flat batch: `input_ids [T]`, `positions [T]` and an `AttentionMetadata`
describing how the T tokens split into sequences (docs/architecture.md). The runner binds the
per-layer KV-cache tensors with `bind_kv_cache` before the first forward; the model never
allocates or frees cache memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch
from torch import nn

from tachyon import kernels
from tachyon.kernels._triton import sm_count
from tachyon.kernels.attention_config import mixed_one_launch
from tachyon.models.layers import Linear, MergedLinear, RMSNorm, RotaryEmbedding, norm_linear, silu_linear
from tachyon.models.prefetch import WeightPrefetcher
from tachyon.models.spec import ModelSpec

# decode batches of at least this many sequences take decode_qkv_attention, while their context is split
# (the latency regime: few (sequence, KV head) programs). On the H200 (decode-step replays, 512-token
# context; benchmarks/results/decode_fused_session5/) the fused kernel wins at B=8 (Qwen2.5-7B step 4.276
# -> 4.201 ms, Qwen3-0.6B 1.146 -> 1.109) and is even at 7B B=1, but loses at 0.6B B=1 (0.818 -> 0.866)
# and at B=256, where nothing is split (7B 7.868 -> 7.949 ms; its key loop is slower than the dedicated
# decode kernel's)
FUSED_DECODE_MIN_BATCH = 2


def fused_decode_attention(batch: int, num_kv_heads: int, max_seq_len: int, device: torch.device) -> bool:
    """Whether a decode step of `batch` sequences takes decode_qkv_attention (one kernel) instead of qkv_post
    + attention: from FUSED_DECODE_MIN_BATCH sequences up (TACHYON_FUSED_DECODE_ATTN=N overrides the minimum,
    0: never) and only while the attention splits the context. Read per forward: a CUDA graph keeps what
    was in force at capture."""
    least = int(os.environ.get("TACHYON_FUSED_DECODE_ATTN", FUSED_DECODE_MIN_BATCH))
    return 0 < least <= batch and kernels.decode_kv_splits(batch, num_kv_heads, max_seq_len, device) > 1


class Attention(nn.Module):
    def __init__(self, spec: ModelSpec, rotary: RotaryEmbedding):
        """`rotary` is the model's one rotary table, shared by every layer (not owned here)."""
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.scale = self.head_dim ** -0.5
        self.qkv_proj = MergedLinear(spec.hidden_size, {"q": spec.q_size, "k": spec.kv_size, "v": spec.kv_size},
                                     bias=spec.attention_bias)
        self.o_proj = Linear(spec.q_size, spec.hidden_size)
        self.q_norm = RMSNorm(self.head_dim, spec.rms_norm_eps) if spec.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, spec.rms_norm_eps) if spec.qk_norm else None
        self.rotary = rotary
        self.kv_cache: torch.Tensor | None = None

    def forward(self, positions: torch.Tensor, qkv: torch.Tensor, meta) -> torch.Tensor:
        """qkv [T, q + 2 kv] (the qkv_proj output, which the layer computes fused with its norm)
        -> [T, hidden]. Decode batches that fused_decode_attention picks (one token per sequence, at
        position seq_len - 1): one fused call, (q/k norm,) rotary, K/V store into `self.kv_cache` and
        attention. Otherwise one call for the norm / rotary / store (q comes back contiguous), then the
        attention kernel; a mixed step's `meta.parts` through attend_mixed."""
        t = qkv.shape[0]
        has_norm = self.q_norm is not None
        if meta.parts is not None:  # a mixed step: decode rows and prompt chunks
            q = self._store_kv(positions, qkv, meta)
            o = self.attend_mixed(q, meta, torch.empty_like(q))
            return self.o_proj(o.reshape(t, self.num_heads * self.head_dim))
        if meta.max_query_len == 1 and t == meta.seq_lens.shape[0] and fused_decode_attention(
                t, self.num_kv_heads, meta.max_seq_len, qkv.device):
            o = kernels.decode_qkv_attention(
                qkv, self.rotary.cos_sin_cache, self.kv_cache, meta.slot_mapping,
                self.q_norm.weight if has_norm else None, self.k_norm.weight if has_norm else None,
                self.q_norm.eps if has_norm else 0.0, self.num_heads, self.num_kv_heads, self.head_dim,
                meta.query_start_loc, meta.seq_lens, meta.block_tables, meta.max_seq_len, self.scale,
                decode_order=meta.order,
            )
            return self.o_proj(o.reshape(t, self.num_heads * self.head_dim))
        q = self._store_kv(positions, qkv, meta)
        o = kernels.attention(q, self.kv_cache, meta.query_start_loc, meta.seq_lens, meta.block_tables,
                              meta.max_query_len, meta.max_seq_len, self.scale, decode_order=meta.order)
        return self.o_proj(o.reshape(t, self.num_heads * self.head_dim))

    def attend_mixed(self, q: torch.Tensor, meta, out: torch.Tensor) -> torch.Tensor:
        """A mixed step's attention of q [T, heads, head_dim] (K/V already stored) over this layer's cache into
        `out`: `meta.parts` (decode part, chunk part) in one launch (kernels.mixed_attention; the default) or one
        kernel per part (attention_config.mixed_one_launch). Rows neither part covers are left unwritten."""
        dec, chunk = meta.parts
        if mixed_one_launch():
            kernels.mixed_attention(q, self.kv_cache, dec.query_start_loc, dec.seq_lens, dec.block_tables,
                                    chunk.query_start_loc, chunk.seq_lens, chunk.block_tables, chunk.max_query_len,
                                    chunk.max_seq_len, self.scale, out=out, decode_order=dec.order)
        else:
            for part in meta.parts:
                kernels.attention(q, self.kv_cache, part.query_start_loc, part.seq_lens, part.block_tables,
                                  part.max_query_len, part.max_seq_len, self.scale, out=out)
        return out

    def _store_kv(self, positions: torch.Tensor, qkv: torch.Tensor, meta) -> torch.Tensor:
        """(q/k norm,) rotary and the K/V store of every row (kernels.qkv_post); returns q [T, heads, head_dim]."""
        has_norm = self.q_norm is not None
        return kernels.qkv_post(
            qkv, positions, self.rotary.cos_sin_cache, self.kv_cache, meta.slot_mapping,
            self.q_norm.weight if has_norm else None, self.k_norm.weight if has_norm else None,
            self.q_norm.eps if has_norm else 0.0, self.num_heads, self.num_kv_heads, self.head_dim,
        )

    def forward_kept(self, positions: torch.Tensor, qkv: torch.Tensor, meta, keep) -> torch.Tensor:
        """As forward (every row's K/V stored), but the attention output only for the rows `keep.rows`, each the
        last of its sequence in the step (keep.meta: one query per sequence) -> [len(keep.rows), hidden]."""
        q = self._store_kv(positions, qkv, meta)
        km = keep.meta
        n = keep.rows.shape[0]
        if n == 0:
            return qkv.new_empty(0, self.o_proj.out_features)
        o = kernels.attention(q.index_select(0, keep.rows), self.kv_cache, km.query_start_loc, km.seq_lens,
                              km.block_tables, 1, km.max_seq_len, self.scale)
        return self.o_proj(o.reshape(n, self.num_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.gate_up_proj = MergedLinear(spec.hidden_size, {"gate": spec.intermediate_size,
                                                            "up": spec.intermediate_size})
        self.down_proj = Linear(spec.intermediate_size, spec.hidden_size)
        self.down_proj.prologue = "silu"

    def forward(self, gate_up: torch.Tensor) -> torch.Tensor:
        """gate_up [T, 2 I] (the gate_up_proj output, computed fused with the layer's norm) -> [T, hidden]."""
        return silu_linear(self.down_proj, gate_up)


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec, rotary: RotaryEmbedding, prefetcher: WeightPrefetcher | None = None):
        super().__init__()
        self.prefetcher = prefetcher
        self.input_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.self_attn = Attention(spec, rotary)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.mlp = MLP(spec)
        self.self_attn.qkv_proj.prologue = "rmsnorm"
        self.mlp.gate_up_proj.prologue = "rmsnorm"
        self.mlp.gate_up_proj.epilogue = "silu"

    def bs1_weights(self) -> kernels.LayerBs1Weights:
        """This layer's parameters as the batch-1 layer kernel reads them (views, built per call: a CUDA graph
        captures them once; quantize_fp8 replacing a weight is then seen)."""
        at, mlp = self.self_attn, self.mlp
        has_norm = at.q_norm is not None
        return kernels.LayerBs1Weights(
            self.input_layernorm.weight, at.qkv_proj.weight, at.qkv_proj.bias,
            at.q_norm.weight if has_norm else None, at.k_norm.weight if has_norm else None, at.o_proj.weight,
            self.post_attention_layernorm.weight, mlp.gate_up_proj.weight, mlp.down_proj.weight,
            self.input_layernorm.eps, at.q_norm.eps if has_norm else 0.0, at.num_heads, at.num_kv_heads,
            at.head_dim, at.scale)

    def bs1_layer_mode(self, x: torch.Tensor, meta) -> str:
        """How a step runs this layer: "phases" / "fused" (kernels.decoder_layer_bs1, five launches or one; "model":
        the model runs every layer in one launch, kernels.decoder_model_bs1) for one decode token on CUDA as
        TACHYON_LAYER_BS1 asks (unset: layer_bs1_knobs.default_layer_bs1_mode's choice for the GPU), when the
        weights and the KV cache are in x's dtype (not FP8) and the row blocks fit (layer_bs1_fits); else "off", the
        layer's usual kernels. Every layer shares one shape, so the first layer's answer is the model's."""
        if x.shape[0] != 1 or meta.max_query_len != 1 or meta.parts is not None or not kernels.use_triton(x):
            return "off"
        mode = kernels.layer_bs1_mode(x.device)
        weights = (self.self_attn.qkv_proj.weight, self.self_attn.o_proj.weight, self.mlp.down_proj.weight)
        kv_cache = self.self_attn.kv_cache
        if mode == "off" or any(w.dtype != x.dtype for w in weights) or kv_cache is None or kv_cache.dtype != x.dtype:
            return "off"  # FP8 layers keep their kernels; so do e4m3 caches (the kernel stores them, unmeasured)
        return mode if kernels.layer_bs1_fits(self.bs1_weights(), sm_count(x.device)) else "off"

    def forward(self, positions, x, residual, meta):
        mode = self.bs1_layer_mode(x, meta)
        if mode != "off":
            at = self.self_attn
            return kernels.decoder_layer_bs1(x, residual, self.bs1_weights(), at.kv_cache, at.rotary.cos_sin_cache,
                                             meta.slot_mapping, meta.seq_lens, meta.block_tables, meta.max_seq_len,
                                             phases=mode == "phases")
        qkv, residual = norm_linear(self.input_layernorm, self.self_attn.qkv_proj, x, residual)
        if self.prefetcher is not None and self.prefetcher.budget_bytes > 0:
            self.prefetcher.after_qkv([self.self_attn.o_proj.weight, self.mlp.gate_up_proj.weight,
                                       self.mlp.down_proj.weight])
        h = self.self_attn(positions, qkv, meta)
        gu = self.mlp.gate_up_proj
        if gu.epilogue_config is not None and h.shape[0] == 1 and h.is_contiguous():
            # batch 1, where tuning chose it: the activation in the gate|up GEMV's epilogue (no activation
            # kernel; the down projection then runs plain, whatever its prologue choice)
            hn, residual = self.post_attention_layernorm(h, residual)
            return self.mlp.down_proj(kernels.gemv_glu(hn, gu.weight, gu.bias, gu.epilogue_config)), residual
        gate_up, residual = norm_linear(self.post_attention_layernorm, gu, h, residual)
        return self.mlp(gate_up), residual

    def forward_kept(self, positions, x, residual, meta, keep):
        """The last layer of a step whose caller needs only the rows `keep.rows` (batch.KeptRows): every row's
        qkv and K/V store, then attention output, o_proj and MLP for the kept rows alone. Returns (x, residual)
        of those rows, in keep.rows' order (both empty when none is kept)."""
        qkv, residual = norm_linear(self.input_layernorm, self.self_attn.qkv_proj, x, residual)
        h = self.self_attn.forward_kept(positions, qkv, meta, keep)
        if h.shape[0] == 0:
            return h, h
        gate_up, residual = norm_linear(self.post_attention_layernorm, self.mlp.gate_up_proj, h,
                                        residual.index_select(0, keep.rows))
        return self.mlp(gate_up), residual


class DecoderForCausalLM(nn.Module):
    # checkpoint name fragment -> (our fused parameter fragment, shard)
    _FUSED = {
        ".q_proj.": (".qkv_proj.", "q"),
        ".k_proj.": (".qkv_proj.", "k"),
        ".v_proj.": (".qkv_proj.", "v"),
        ".gate_proj.": (".gate_up_proj.", "gate"),
        ".up_proj.": (".gate_up_proj.", "up"),
    }

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.embed_tokens.weight.requires_grad_(False)
        self.prefetcher = WeightPrefetcher()  # off unless the decode-graph runner gives it a budget
        # one cos|sin table for all layers ([max_pos, rot] fp32: 16.8 MB for Qwen2.5-7B, 28 copies before), so
        # the decode step's row stays in L2 from one layer to the next
        self.rotary = RotaryEmbedding(spec.head_dim, spec.max_position_embeddings, spec.rope_theta, spec.rope_scaling)
        self.layers = nn.ModuleList(DecoderLayer(spec, self.rotary, self.prefetcher) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        # tied: the output projection is a Linear sharing the embedding's parameter (not a copy), so warm-up
        # tunes its batch-1 / small-batch kernels like any projection; named_parameters lists it once, as
        # embed_tokens.weight (registered first)
        self.tied = spec.tie_word_embeddings
        if self.tied:
            with torch.device("meta"):  # no throwaway [vocab, hidden] allocation before the weight is replaced
                self.lm_head = Linear(spec.hidden_size, spec.vocab_size)
            self.lm_head.weight = self.embed_tokens.weight
        else:
            self.lm_head = Linear(spec.hidden_size, spec.vocab_size)

    def quantize_fp8(self) -> None:
        """Every decoder-layer projection to FP8 W8A8 (Linear.quantize_fp8); the embedding and the lm_head
        (tied or not) stay in the model's dtype. Frees the replaced weights' cached GPU memory, so the KV-cache
        sizing that follows sees it."""
        for layer in self.layers:
            for mod in layer.modules():
                if isinstance(mod, Linear):
                    mod.quantize_fp8()
        if self.embed_tokens.weight.is_cuda:
            torch.cuda.empty_cache()

    def bind_kv_cache(self, kv_caches: list[torch.Tensor]) -> None:
        """Give each layer its cache tensor [2, blocks, block_size, kv_heads, head_dim]; the caller owns them.
        An empty list unbinds (drops the model's references)."""
        if not kv_caches:
            kv_caches = [None] * len(self.layers)
        if len(kv_caches) != len(self.layers):
            raise ValueError(f"expected {len(self.layers)} KV-cache tensors, got {len(kv_caches)}")
        for layer, cache in zip(self.layers, kv_caches):
            layer.self_attn.kv_cache = cache

    def forward(self, input_ids: torch.Tensor | None, positions: torch.Tensor, meta,
                inputs_embeds: torch.Tensor | None = None, keep=None) -> torch.Tensor:
        """Hidden states [T, hidden] after the final norm. `inputs_embeds` [T, hidden], when given, are the
        token embeddings (e.g. from kernels.embed_step); input_ids is then ignored and may be None.
        `keep` (engine.batch.KeptRows: row indices, each its sequence's last row in the step, and their
        one-query-per-sequence metadata): only those rows' states are returned, [len(keep.rows), hidden] in
        its order, and the last layer runs its attention output path and MLP on them alone (every row's K/V
        is still stored)."""
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        if keep is None and self.layers[0].bs1_layer_mode(x, meta) == "model":
            x, residual = kernels.decoder_model_bs1(
                x, [layer.bs1_weights() for layer in self.layers],
                [layer.self_attn.kv_cache for layer in self.layers], self.rotary.cos_sin_cache, meta.slot_mapping,
                meta.seq_lens, meta.block_tables, meta.max_seq_len)
            x, _ = self.norm(x, residual)
            return x
        residual = None
        last = len(self.layers) - 1 if keep is not None else len(self.layers)
        for layer in self.layers[:last]:
            x, residual = layer(positions, x, residual, meta)
        if keep is not None:
            x, residual = self.layers[last].forward_kept(positions, x, residual, meta, keep)
        self.prefetcher.join()
        if x.shape[0] == 0:  # nothing samples: the last layer only stored its K/V
            return x
        x, _ = self.norm(x, residual)
        return x

    def compute_logits(self, hidden: torch.Tensor, out_dtype: torch.dtype | None = None,
                       out: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [T, V] in out_dtype (default the model's, or out's), through lm_head (tied or not): batch-1 /
        small-batch kernels where tuning chose them, which write out_dtype directly; `out` as Linear.forward's."""
        return self.lm_head(hidden, out_dtype=out_dtype, out=out)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load HF-named tensors; returns the keys filled (`name#shard` for fused parameters)."""
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, tensor in weights:
            if "rotary_emb.inv_freq" in name:
                continue
            if name.startswith("model."):
                name = name[len("model."):]
            if name == "lm_head.weight" and self.tied:
                continue  # tied: the embedding is the output projection
            shard = None
            for frag, (fused, shard_name) in self._FUSED.items():
                if frag in name:
                    name, shard = name.replace(frag, fused), shard_name
                    break
            param = params.get(name)
            if param is None:
                raise ValueError(f"checkpoint tensor {name!r} has no matching parameter in {self.spec.architecture}")
            loader = getattr(param, "weight_loader", None)
            if loader is None:
                if param.shape != tensor.shape:
                    raise ValueError(f"{name}: expected shape {tuple(param.shape)}, got {tuple(tensor.shape)}")
                param.data.copy_(tensor)
            else:
                loader(param, tensor.to(param.dtype), shard)
            loaded.add(name if shard is None else f"{name}#{shard}")
        return loaded

    def expected_keys(self) -> set[str]:
        """What `load_weights` must report for a complete checkpoint (fused params once per shard)."""
        keys = set()
        for mod_name, mod in self.named_modules():
            for pname, _ in mod.named_parameters(recurse=False):
                full = f"{mod_name}.{pname}" if mod_name else pname
                if self.tied and full == "lm_head.weight":
                    continue  # the embedding, loaded under its own name
                if isinstance(mod, MergedLinear):
                    keys.update(f"{full}#{shard}" for shard in mod.offsets)
                else:
                    keys.add(full)
        return keys
