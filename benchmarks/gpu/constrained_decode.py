"""Constrained decoding on the GPU: logit_bias and structured outputs (JSON schema, regex, choice) through the graphed
engine on a dummy-weight shape, each checked and timed against plain sampled rows of the same batch size.

Dummy shapes ship no tokenizer, so `--tokenizer` names one (a directory with tokenizer.json, e.g. the default
model's, SmolLM2's 49,152-token vocabulary: tokenizer.json and tokenizer_config.json from the directory the default
model's GGUF converts to, ~/.cache/tachyon/gguf/SmolLM2-135M-Instruct*/, after its first load; bench scripts carry
it as .gpu_tok/, git-ignored); the model keeps its own vocabulary (Qwen2.5-7B's 152,064 rows), so a
grammar's mask must also shut the ids the tokenizer lacks. EOS is set to the tokenizer's.

Checks (any failure is reported in the JSON and exits 1): every JSON output parses and meets the schema's enum,
types and bounds; every regex output matches; every choice output is one of the choices; a -100-biased token never
appears; a +100-biased token is every token drawn.

Usage (device, repo root): python3 benchmarks/gpu/constrained_decode.py --tokenizer DIR --out $OUT [--shape ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from tachyon import LLM, SamplingParams  # noqa: E402
from tachyon.sampling import StructuredOutputsParams  # noqa: E402

# a forced tool call's arguments, as the server's tool_choice turns them into a schema
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "enum": ["get_weather", "get_time"]},
        "arguments": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 24},
                           "days": {"type": "integer", "minimum": 1, "maximum": 14},
                           "metric": {"type": "boolean"}},
            "required": ["city", "days", "metric"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}
REGEX = r"[A-Z][a-z]{2,12} [0-9]{1,3}(\.[0-9]{1,2})? (kg|lb)"
CHOICE = ["positive", "negative", "neutral"]
# sampler_costs' JSON rows: one unbounded string, so the rows stay inside a string (llguidance's dearest masks)
STRING_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def check_json(text: str) -> str | None:
    try:
        v = json.loads(text)
    except ValueError as e:
        return f"not JSON: {e}: {text[:80]!r}"
    a = v.get("arguments") if isinstance(v, dict) else None
    if set(v) != {"name", "arguments"} or v["name"] not in ("get_weather", "get_time") or not isinstance(a, dict):
        return f"top level off the schema: {text[:80]!r}"
    if set(a) != {"city", "days", "metric"} or not isinstance(a["city"], str) or len(a["city"]) > 24:
        return f"arguments off the schema: {text[:80]!r}"
    if type(a["days"]) is not int or not 1 <= a["days"] <= 14 or type(a["metric"]) is not bool:
        return f"days/metric off the schema: {text[:80]!r}"
    return None


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def params_for(kind: str, i: int, max_tokens: int, banned: list[int], forced: int | None) -> SamplingParams:
    base = dict(max_tokens=max_tokens, temperature=0.8, top_p=0.95, seed=i)
    if kind == "plain":
        return SamplingParams(**base, ignore_eos=True, detokenize=False)
    if kind == "logprobs":  # not a constraint: the other per-row work a launched step now does on the device
        return SamplingParams(**base, ignore_eos=True, detokenize=False, logprobs=5)
    if kind == "penalty":
        return SamplingParams(**base, ignore_eos=True, detokenize=False, presence_penalty=0.5, frequency_penalty=0.3,
                              repetition_penalty=1.1)
    if kind == "bias":
        bias = {t: -100.0 for t in banned}
        if forced is not None:
            bias[forced] = 100.0
        return SamplingParams(**base, ignore_eos=True, detokenize=False, logit_bias=bias)
    spec = {"json": StructuredOutputsParams(json=SCHEMA), "json_text": StructuredOutputsParams(json=SCHEMA),
            "json_string": StructuredOutputsParams(json=STRING_SCHEMA),
            "regex": StructuredOutputsParams(regex=REGEX), "choice": StructuredOutputsParams(choice=CHOICE)}[kind]
    # json_text also detokenizes as it goes (the server's way); the others are decoded once at the end
    return SamplingParams(**base, structured_outputs=spec, detokenize=kind == "json_text")


def run(llm: LLM, tok, prompts: list[list[int]], kinds: list[str], max_tokens: int, banned: list[int],
        forced: int | None = None) -> dict:
    params = [params_for(k, i, max_tokens, banned, forced) for i, k in enumerate(kinds)]
    sync()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    sync()
    dt = time.perf_counter() - t0
    errors: list[str] = []
    per_kind: dict[str, dict] = {}
    for k, o in zip(kinds, outs):
        c = o.outputs[0]
        ids = list(c.token_ids)
        d = per_kind.setdefault(k, {"requests": 0, "output_tokens": 0, "tpot_ms": [], "finish": {}})
        d["requests"] += 1
        d["output_tokens"] += len(ids)
        d["finish"][c.finish_reason] = d["finish"].get(c.finish_reason, 0) + 1
        if len(ids) > 1:
            m = o.metrics
            d["tpot_ms"].append(1e3 * (m.finished_time - m.first_token_time) / (len(ids) - 1))
        if k == "json_string":  # an unbounded string: max_tokens mostly ends it, inside the string
            text = tok.decode(ids, skip_special_tokens=True)
            if c.finish_reason == "stop":
                try:
                    ok = list(json.loads(text)) == ["text"]
                except ValueError:
                    ok = False
            else:
                ok = text.startswith('{"text": "')
            if not ok:
                errors.append(f"json_string: off the schema ({c.finish_reason}): {text[:80]!r}")
        if k in ("json", "json_text", "regex", "choice"):
            text = tok.decode(ids, skip_special_tokens=True)
            if c.finish_reason != "stop":
                errors.append(f"{k}: finished by {c.finish_reason} after {len(ids)} tokens: {text[:80]!r}")
            elif k.startswith("json") and (e := check_json(text)):
                errors.append(f"json: {e}")
            elif k == "regex" and not re.fullmatch(REGEX, text):
                errors.append(f"regex: no match: {text!r}")
            elif k == "choice" and text not in CHOICE:
                errors.append(f"choice: {text!r} is not a choice")
            samples = d.setdefault("samples", [])
            if len(samples) < 3:
                samples.append(text)
        if k == "logprobs" and (c.logprobs is None or len(c.logprobs) != len(ids)
                                or any(t not in d for t, d in zip(ids, c.logprobs))):
            errors.append("logprobs: an output token without its logprob entry")
        if k == "bias":
            if any(t in banned for t in ids):
                errors.append("bias: a -100-biased token was drawn")
            if forced is not None and any(t != forced for t in ids):
                errors.append(f"bias: +100 on {forced} but drew {sorted(set(ids) - {forced})[:5]}")
    for d in per_kind.values():
        t = d.pop("tpot_ms")
        d["tpot_mean_ms"] = sum(t) / len(t) if t else None
    n_out = sum(d["output_tokens"] for d in per_kind.values())
    return dict(batch=len(prompts), kinds=sorted(set(kinds)), seconds=dt, output_tokens=n_out,
                output_tok_s=n_out / dt, per_kind=per_kind, errors=errors[:10], n_errors=len(errors))


def _sample_step(sampler, logits: torch.Tensor, reqs: list, drawn: torch.Tensor) -> None:
    """One Sampler call; as in the engine, each row's token joins its history (the penalties' counts follow it)."""
    for r, t in zip(reqs, sampler(logits, reqs, drawn=drawn).token_ids):
        r.append_token(t)


def sampler_costs(llm: LLM, prompt: list[int], batch: int, banned: list[int], iters: int = 30) -> dict:
    """Host wall time (ms) of one Sampler call on a (batch, vocab) bf16 logits tensor on the device, per kind of row
    (plain rows keep the graph's drawn tokens), and of mask_logits alone for JSON rows: the sampler's share of a
    constrained step, apart from the overlap it gives up."""
    from tachyon.engine.request import Request
    from tachyon.engine.structured import mask_logits

    eng = llm.engine
    dev = eng.device
    logits = torch.randn(batch, eng.spec.vocab_size, device=dev, dtype=torch.bfloat16)
    drawn = torch.zeros(batch, dtype=torch.long, device=dev)
    res = {}
    for kind in ("plain", "bias", "penalty", "json_string"):
        reqs = []
        for i in range(batch):
            p = params_for(kind, i, 1 << 20, banned, None)
            r = Request(f"m{i}", list(prompt), p, eos_token_ids=eng.spec.eos_token_ids, max_model_len=1 << 21,
                        sample_seed=i)
            for t in range(100):  # an output history for the penalties
                r.append_token(1000 + (t * 7 + i) % 300)
            if p.structured_outputs is not None:
                r.matcher = eng.grammars.matcher(p.structured_outputs)
            reqs.append(r)
        for _ in range(3):
            _sample_step(eng.runner.sampler, logits, reqs, drawn)
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            _sample_step(eng.runner.sampler, logits, reqs, drawn)
        sync()
        res[f"sampler_{kind}_ms"] = 1e3 * (time.perf_counter() - t0) / iters
        if kind == "json_string":
            eng.runner.sampler.masks.wait()  # the sampler's prefetch owns the matchers until it is done
            res["json_rows_stopped"] = sum(r.matcher.is_stopped() for r in reqs)
            f = logits.float()
            rows = list(range(batch))
            sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                mask_logits(f, rows, [r.matcher for r in reqs], [r.eos_token_ids for r in reqs])
            sync()
            res["mask_logits_json_string_ms"] = 1e3 * (time.perf_counter() - t0) / iters
    return dict(batch=batch, **res)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--kinds", default="plain,bias,penalty,json,json_text,regex,choice",
                    help="row kinds run alone at each batch size (also: json_string, an unbounded JSON string; "
                         "logprobs, top-5 logprobs on plain rows)")
    ap.add_argument("--no-prefetch", action="store_true",
                    help="structured rows' masks filled when their step samples, not prefetched (an A/B)")
    ap.add_argument("--profile", default="", help="kinds to run once at the largest batch under cProfile "
                    "(comma-separated); the top functions by own time go to profile_<kind>.txt under --out")
    ap.add_argument("--overrides", default="{}", help="JSON merged into the shape's config (a CPU check: layers)")
    ap.add_argument("--launched-redraws", default="structured",
                    help="sampler.LAUNCHED_REDRAWS modes to run the kinds under, comma-separated (structured, all: "
                         "biased and penalised rows launched too); cases of a mode other than the first get its name")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    if args.no_prefetch:
        from tachyon.engine.structured import MaskPrefetch

        MaskPrefetch.start = lambda self, *a: None
    llm = LLM(args.shape, load_format="dummy", tokenizer=args.tokenizer, max_model_len=2048, device=args.device,
              hf_config_overrides={**json.loads(args.overrides), "eos_token_id": tok.eos_token_id})
    wl = Path(__file__).resolve().parents[2] / "tachyon" / "bench" / "workloads" / "seed8.json"
    vocab = llm.engine.spec.vocab_size
    base = [[t % vocab for t in r["prompt_token_ids"][:64]] for r in json.loads(wl.read_text())["requests"]]
    banned = [int(t) for t in torch.randint(0, vocab, (50,), generator=torch.Generator().manual_seed(1))]
    mt = args.max_tokens
    # warm-up: every path once (the llguidance tokenizer is built on the first structured request)
    llm.generate(base[:2], SamplingParams(max_tokens=8, ignore_eos=True, detokenize=False), use_tqdm=False)
    for k in ("bias", "json", "regex", "choice"):
        run(llm, tok, base[:2], [k, k], 16, banned)
    results = []
    t_all = time.perf_counter()
    from tachyon.engine import sampler

    modes = args.launched_redraws.split(",")
    for mode in modes:
        sampler.LAUNCHED_REDRAWS = mode
        tag = "" if mode == modes[0] else f"_{mode}"
        for b in (int(x) for x in args.batches.split(",")):
            prompts = [base[i % len(base)] for i in range(b)]
            for k in args.kinds.split(","):
                results.append(dict(case=f"{k}_b{b}{tag}", launched_redraws=mode,
                                    **run(llm, tok, prompts, [k] * b, mt, banned)))
            if b > 1 and not tag:  # half JSON, half plain: what a structured row costs the plain rows beside it
                kinds = ["json" if i % 2 else "plain" for i in range(b)]
                results.append(dict(case=f"mixed_json_plain_b{b}", **run(llm, tok, prompts, kinds, mt, banned)))
    sampler.LAUNCHED_REDRAWS = modes[0]
    forced = next(t for t in range(1000, 2000) if t not in banned)
    results.append(dict(case="forced_b4", **run(llm, tok, base[:4], ["bias"] * 4, 16, banned, forced=forced)))
    for k in filter(None, args.profile.split(",")):
        import cProfile
        import io
        import pstats

        b = int(args.batches.split(",")[-1])
        prof = cProfile.Profile()
        prof.enable()
        run(llm, tok, [base[i % len(base)] for i in range(b)], [k] * b, mt, banned)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
        pstats.Stats(prof, stream=buf).sort_stats("cumtime").print_stats(40)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"profile_{k}.txt").write_text(buf.getvalue())
    for r in results:
        pk = "  ".join(f"{k}: {d['output_tokens']} tok, TPOT {d['tpot_mean_ms'] or 0:.2f} ms"
                       for k, d in r["per_kind"].items())
        print(f"{r['case']:24s} {r['seconds']:7.2f} s {r['output_tok_s']:9.1f} tok/s  {pk}  errors {r['n_errors']}")
        for e in r["errors"][:3]:
            print("   ", e)
    costs = [sampler_costs(llm, base[0], b, banned) for b in (1, 16, 64)]
    for c in costs:
        print("sampler costs", json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in c.items()}))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(shape=args.shape, overrides=args.overrides, no_prefetch=args.no_prefetch, tokenizer=args.tokenizer,
                launched_redraws=args.launched_redraws,
                max_tokens=mt, seconds_all=time.perf_counter() - t_all,
                device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
    doc = dict(meta=meta, results=results, sampler_costs=costs)
    (out / "constrained_decode.json").write_text(json.dumps(doc, indent=1))
    return 1 if any(r["n_errors"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
