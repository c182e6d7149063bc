"""Implementations of `tachyon eval ppl | agree`."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tachyon.bench.commands import parse_kv


def _hf_model(model: str | None, dtype: str, device: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tachyon.bench.backends.hf import resolve_device_dtype

    dev, dt = resolve_device_dtype(device, dtype)
    path = model
    if path is None or path.endswith(".gguf"):
        from tachyon.models.default import default_model_path

        path = path or default_model_path()
        from tachyon.models.gguf import gguf_to_hf_dir

        path = gguf_to_hf_dir(path)
    m = AutoModelForCausalLM.from_pretrained(path, dtype=dt).to(dev).eval()
    return m, AutoTokenizer.from_pretrained(path)


def ppl(args) -> int:
    from tachyon.eval.ppl import hf_ppl, tachyon_ppl, tokenize
    from tachyon.eval.text import default_text

    text = Path(args.text).read_text() if args.text else default_text()
    if args.backend == "hf":
        model, tok = _hf_model(args.model, args.dtype, args.device)
        res = hf_ppl(model, tokenize(tok, text, args.max_tokens), args.window, args.stride)
    else:
        from tachyon import LLM

        llm = LLM(model=args.model, dtype=args.dtype, device=args.device, **parse_kv(args.engine_arg))
        window = min(args.window, llm.engine.max_model_len - 1)
        res = tachyon_ppl(llm, tokenize(llm.get_tokenizer(), text, args.max_tokens), window,
                          min(args.stride, window))
    if args.json:
        print(json.dumps(vars(res)))
    else:
        print(f"perplexity {res.ppl:.4f} over {res.tokens} tokens ({res.windows} windows of <= "
              f"{res.window}, stride {res.stride})")
    return 0


def _prompts(args) -> list:
    if args.workload:
        from tachyon.bench.workloads import load_workload

        return [r.prompt_token_ids for r in load_workload(args.workload).requests[:args.num_prompts]]
    default = Path(__file__).parents[1] / "bench" / "workloads" / "seed8_prompts.txt"
    path = Path(args.prompts) if args.prompts else default
    return [ln for ln in path.read_text().splitlines() if ln.strip()][:args.num_prompts]


def agree(args) -> int:
    from tachyon.eval.agree import agree as run_agree
    from tachyon.eval.agree import parse_config

    res = run_agree(parse_config(args.a), parse_config(args.b), _prompts(args), args.max_tokens)
    d = res.as_dict()
    if args.json:
        print(json.dumps(d))
    else:
        print(f"exact match {d['exact_match']:.1%}, token agreement {d['token_agreement']:.1%}, "
              f"first divergence {d['first_divergence']}, mean KL {d['mean_kl']:.3g}")
    bad = (args.min_agreement is not None and d["token_agreement"] < args.min_agreement) or (
        args.max_kl is not None and (math.isnan(d["mean_kl"]) or d["mean_kl"] > args.max_kl))
    return 1 if bad else 0
