"""`tachyon eval ppl | agree` (argument parsing only; see ppl.py and agree.py)."""

from __future__ import annotations

from tachyon.eval import commands


def register(subparsers) -> None:
    ev = subparsers.add_parser("eval", help="quality: perplexity, agreement between two configurations")
    sub = ev.add_subparsers(dest="eval_command", required=True)
    p = sub.add_parser("ppl", help="sliding-window perplexity from prompt logprobs")
    p.add_argument("--model", default=None, help="HF dir or GGUF (default: SmolLM2-135M-Instruct)")
    p.add_argument("--text", default=None, help="text file (default: Python stdlib docstrings)")
    p.add_argument("--max-tokens", type=int, default=4096, help="score at most this many text tokens")
    p.add_argument("--window", type=int, default=1024)
    p.add_argument("--stride", type=int, default=512)
    p.add_argument("--backend", default="tachyon", choices=["tachyon", "hf"])
    p.add_argument("--dtype", default="auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=commands.ppl)
    a = sub.add_parser("agree", help="greedy token agreement and KL between two engine configurations")
    a.add_argument("--a", required=True, help="engine args: JSON, a JSON/YAML file, or k=v,k=v")
    a.add_argument("--b", required=True)
    a.add_argument("--prompts", default=None, help="text file, one prompt per line (default: seed8 prompts)")
    a.add_argument("--workload", default=None, help="use a workload's token-id prompts instead of text")
    a.add_argument("--num-prompts", type=int, default=8)
    a.add_argument("--max-tokens", type=int, default=64)
    a.add_argument("--min-agreement", type=float, default=None, help="exit 1 below this token agreement")
    a.add_argument("--max-kl", type=float, default=None, help="exit 1 above this mean KL")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=commands.agree)
