"""ModelSpec: the normalised, validated view of a Hugging Face config that the decoder needs."""

from __future__ import annotations

from dataclasses import dataclass, field

SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}


@dataclass
class ModelSpec:
    architecture: str
    family: str  # llama | qwen2 | qwen3
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool  # bias on q/k/v projections (Qwen2)
    qk_norm: bool  # per-head RMSNorm on q and k (Qwen3)
    sliding_window: int | None = None
    bos_token_id: int | None = None
    eos_token_ids: list[int] = field(default_factory=list)

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def num_params(self) -> int:
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        attn = h * (self.q_size + 2 * self.kv_size) + self.q_size * h
        per_layer = attn + 3 * h * i + 2 * h
        emb = v * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * per_layer + emb + h

    @classmethod
    def from_hf_config(cls, cfg: dict, generation_config: dict | None = None) -> ModelSpec:
        archs = cfg.get("architectures") or []
        arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
        if arch is None:
            raise ValueError(
                f"unsupported architecture {archs or cfg.get('model_type')!r}: "
                f"supported are {', '.join(sorted(SUPPORTED_ARCHITECTURES))}")
        family = SUPPORTED_ARCHITECTURES[arch]
        try:
            hidden = int(cfg["hidden_size"])
            heads = int(cfg["num_attention_heads"])
            head_dim = cfg.get("head_dim") or hidden // heads
            rope_scaling = cfg.get("rope_scaling")
            rope_params = cfg.get("rope_parameters") or {}
            rope_theta = cfg.get("rope_theta") or rope_params.get("rope_theta") or 10000.0
            if rope_scaling is None and rope_params.get("rope_type", "default") != "default":
                rope_scaling = {k: v for k, v in rope_params.items() if k != "rope_theta"}
            if rope_scaling is not None:
                rope_type = rope_scaling.get("rope_type", rope_scaling.get("type", "default"))
                if rope_type not in ("default", "llama3", "linear"):
                    raise ValueError(f"rope_scaling type {rope_type!r} is not supported "
                                     "(supported: default, linear, llama3)")
                if rope_type == "default":
                    rope_scaling = None
            eos = []
            for src in (generation_config or {}, cfg):
                e = src.get("eos_token_id")
                if e is not None:
                    eos = [int(x) for x in (e if isinstance(e, list) else [e])]
                    break
            sliding = cfg.get("sliding_window") if cfg.get("use_sliding_window", family == "llama") else None
            return cls(
                architecture=arch,
                family=family,
                vocab_size=int(cfg["vocab_size"]),
                hidden_size=hidden,
                intermediate_size=int(cfg["intermediate_size"]),
                num_layers=int(cfg["num_hidden_layers"]),
                num_heads=heads,
                num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
                head_dim=int(head_dim),
                rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
                rope_theta=float(rope_theta),
                rope_scaling=rope_scaling,
                max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
                tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                attention_bias=bool(cfg.get("attention_bias", family == "qwen2")),
                qk_norm=family == "qwen3",
                sliding_window=int(sliding) if sliding else None,
                bos_token_id=cfg.get("bos_token_id"),
                eos_token_ids=eos,
            )
        except KeyError as e:
            raise ValueError(f"model config is missing required field {e.args[0]!r}") from None
