"""`tachyon generate`, `tachyon chat` and `tachyon demo`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tachyon.config import OVERLAP_CHOICES, OVERLAP_HELP
from tachyon.engine.llm import OFFLINE_MAX_NUM_BATCHED_TOKENS, chat_prompt_ids
from tachyon.sampling import SamplingParams

DEMO_QUESTION = "What is the capital of France? Answer in one sentence."
DEMO_PROMPTS = [
    "Write a haiku about the sea.",
    "Explain what a CPU cache is in two sentences.",
    "Give three tips for writing clean Python code.",
    "What is the boiling point of water at sea level?",
    "Name the planets of the solar system.",
    "Why is the sky blue? Answer briefly.",
    "Translate 'good morning' into French and Spanish.",
    "Summarise the plot of Romeo and Juliet in one sentence.",
]


def add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None,
                   help="HF directory, .gguf file or dummy shape (default: SmolLM2-135M-Instruct)")
    p.add_argument("--load-format", default="auto", choices=["auto", "safetensors", "gguf", "dummy"])
    p.add_argument("--dtype", default="auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=512)
    p.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help=f"tokens per step (default: the offline LLM's, {OFFLINE_MAX_NUM_BATCHED_TOKENS:,})")
    p.add_argument("--scheduling-policy", default=None, choices=["fcfs", "lpt", "flat"],
                   help="admission order: fcfs (arrival order), lpt (longest remaining output first, a flat "
                        "running set) or flat (lpt's order, prompt chunks filling each step beside the decodes; "
                        "engine/scheduler.py). Default: flat on a CUDA device, fcfs on the CPU")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--prefill-graph-max-tokens", type=int, default=512,
                   help="prefill / mixed steps up to this many tokens replay CUDA graphs (0: eager)")
    p.add_argument("--mixed-graph-max-tokens", type=int, default=1024,
                   help="mixed steps (decodes plus one prompt chunk of up to this many tokens) replay CUDA graphs "
                        "(0: eager)")
    p.add_argument("--quantization", default=None, choices=["fp8"],
                   help="fp8: W8A8 decoder projections (FP8 e4m3 weights, per-row dynamic activation scales)")
    p.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8"],
                   help="fp8: the KV cache in e4m3 (scale 1; half the bytes per token). auto: the model dtype")
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=False,
                   help="share the KV of leading full blocks that earlier requests computed instead of recomputing it "
                        "(off by default: greedy output may then depend on earlier requests)")
    p.add_argument("--long-prefill-token-threshold", type=int, default=0,
                   help="while a shorter prompt waits, a prompt computes at most this many tokens a step (0: off)")
    p.add_argument("--overlap-scheduling", default="auto", choices=sorted(OVERLAP_CHOICES), help=OVERLAP_HELP)
    p.add_argument("--seed", type=int, default=0)


def engine_kwargs(args: argparse.Namespace) -> dict:
    """EngineConfig arguments from add_engine_args' flags; max_num_batched_tokens and scheduling_policy only when
    given (LLM then picks the offline defaults for its device)."""
    kw = dict(load_format=args.load_format, dtype=args.dtype, device=args.device,
              max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
              gpu_memory_utilization=args.gpu_memory_utilization, enforce_eager=args.enforce_eager,
              prefill_graph_max_tokens=args.prefill_graph_max_tokens,
              mixed_graph_max_tokens=args.mixed_graph_max_tokens, seed=args.seed,
              quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype,
              enable_prefix_caching=args.enable_prefix_caching,
              long_prefill_token_threshold=args.long_prefill_token_threshold,
              overlap_scheduling=OVERLAP_CHOICES[args.overlap_scheduling])
    if args.max_num_batched_tokens is not None:
        kw["max_num_batched_tokens"] = args.max_num_batched_tokens
    if args.scheduling_policy is not None:
        kw["scheduling_policy"] = args.scheduling_policy
    return kw


def _add_sampling_args(p: argparse.ArgumentParser, max_tokens: int) -> None:
    p.add_argument("--max-tokens", type=int, default=max_tokens)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--sampling-seed", type=int, default=None)


def _sampling(args: argparse.Namespace) -> SamplingParams:
    return SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                          top_k=args.top_k, seed=args.sampling_seed)


def register(sub) -> None:
    g = sub.add_parser("generate", help="generate completions for prompts")
    add_engine_args(g)
    _add_sampling_args(g, 64)
    g.add_argument("--prompt", action="append", default=[], help="a prompt (repeatable)")
    g.add_argument("--prompts-file", help="a file with one prompt per line")
    g.add_argument("--chat", action="store_true", help="wrap each prompt in the chat template")
    g.set_defaults(func=cmd_generate)

    c = sub.add_parser("chat", help="interactive chat, streaming tokens")
    add_engine_args(c)
    _add_sampling_args(c, 512)
    c.add_argument("--system", default=None, help="system prompt")
    c.set_defaults(func=cmd_chat)

    d = sub.add_parser("demo", help="chat answer + small timed batch on the default model")
    add_engine_args(d)
    d.set_defaults(func=cmd_demo)


def _run_batch(llm, prompts: list[str], sp: SamplingParams, chat: bool):
    t0 = time.perf_counter()
    if chat:
        outs = llm.chat([[{"role": "user", "content": p}] for p in prompts], sp, use_tqdm=len(prompts) > 1)
    else:
        outs = llm.generate(prompts, sp, use_tqdm=len(prompts) > 1)
    dt = time.perf_counter() - t0
    n_out = sum(len(c.token_ids) for o in outs for c in o.outputs)
    return outs, dt, n_out


def cmd_generate(args: argparse.Namespace) -> int:
    from tachyon import LLM

    prompts = list(args.prompt)
    if args.prompts_file:
        prompts += [ln.rstrip("\n") for ln in Path(args.prompts_file).read_text().splitlines() if ln.strip()]
    if not prompts:
        print("error: give --prompt or --prompts-file", file=sys.stderr)
        return 2
    llm = LLM(args.model, **engine_kwargs(args))
    outs, dt, n_out = _run_batch(llm, prompts, _sampling(args), args.chat)
    for p, o in zip(prompts, outs):
        print(f"### {p}\n{o.outputs[0].text}\n")
    print(f"[{len(prompts)} prompts, {n_out} tokens in {dt:.2f} s: {n_out / dt:.1f} tok/s]")
    return 0


def stream_chat_reply(llm, messages: list[dict], sp: SamplingParams, out=sys.stdout) -> tuple[str, int, float]:
    """Generate one reply, printing text as it becomes stable. Returns (text, tokens, seconds)."""
    eng = llm.engine
    ids = chat_prompt_ids(eng.tokenizer, messages)
    rid = f"chat-{time.monotonic_ns()}"
    t0 = time.perf_counter()
    eng.add_request(rid, list(ids), sp)
    shown = 0
    final = None
    try:
        while eng.has_unfinished():
            for o in eng.step():
                text = o.outputs[0].text
                if o.finished:
                    final = o
                out.write(text[shown:])
                out.flush()
                shown = len(text)
    except KeyboardInterrupt:
        eng.abort(rid)
        raise
    out.write("\n")
    n = len(final.outputs[0].token_ids) if final else 0
    return (final.outputs[0].text if final else ""), n, time.perf_counter() - t0


def cmd_chat(args: argparse.Namespace) -> int:
    from tachyon import LLM

    llm = LLM(args.model, **engine_kwargs(args))
    sp = _sampling(args)
    history: list[dict] = [{"role": "system", "content": args.system}] if args.system else []
    print("tachyon chat — empty line or Ctrl-D to quit")
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if not line.strip():
            return 0
        history.append({"role": "user", "content": line})
        try:
            text, n, dt = stream_chat_reply(llm, history, sp)
        except KeyboardInterrupt:
            print("\n[interrupted]")
            history.pop()
            continue
        history.append({"role": "assistant", "content": text})
        print(f"[{n} tokens, {n / max(dt, 1e-9):.1f} tok/s]")


def cmd_demo(args: argparse.Namespace) -> int:
    from tachyon import LLM

    t0 = time.perf_counter()
    llm = LLM(args.model, **engine_kwargs(args))
    eng = llm.engine
    print(f"loaded {eng.model_name} on {eng.device} ({eng.dtype}) in {time.perf_counter() - t0:.1f} s")
    print(f"\n> {DEMO_QUESTION}")
    sp = SamplingParams(temperature=0.0, max_tokens=64)
    _, n, dt = stream_chat_reply(llm, [{"role": "user", "content": DEMO_QUESTION}], sp)
    print(f"[{n} tokens in {dt:.2f} s: {n / dt:.1f} tok/s, single stream]\n")
    sp = SamplingParams(temperature=0.7, top_p=0.9, seed=0, max_tokens=64)
    outs, dt, n_out = _run_batch(llm, DEMO_PROMPTS, sp, chat=True)
    for p, o in zip(DEMO_PROMPTS[:2], outs[:2]):
        print(f"### {p}\n{o.outputs[0].text.strip()}\n")
    print(f"[batch of {len(DEMO_PROMPTS)} chats: {n_out} tokens in {dt:.2f} s: {n_out / dt:.1f} tok/s]")
    return 0
