"""Where a served request's TTFT goes: the client's per-request log (`bench serve --output`, .requests.jsonl[.gz])
beside the server's access lines (`tachyon serve`'s JSON log: server-side TTFT from the handler's arrival, engine
queue time) and, optionally, arrivals_probe.py's per-request TTFT for the engine alone on the same arrivals
(`--arrivals-from` that same client log).

Per request it splits the client's TTFT (send to first streamed byte) into: HTTP arrival lag (send to the handler,
on the client's clock), the engine's queue time (the request's creation to its first scheduled step) and the rest
of the server's TTFT. Server lines are matched to client rows by prompt and completion tokens, then by end time
(the clocks' offset is the median over the pairs that the token counts alone match).

Usage: python3 benchmarks/ttft_breakdown.py CLIENT.requests.jsonl.gz SERVER.log.gz [--probe ARRIVALS.json]
           [--long-len 8192] [--slowest 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.long_prefill_sim import nearest_rank  # noqa: E402
from tachyon.bench.schema import read_jsonl  # noqa: E402


def join(client: list[dict], server: list[dict]) -> list[dict]:
    """One row per answered client request: id, prompt tokens, send time (s), and ms for client TTFT, server TTFT,
    queue time and arrival lag. Raises ValueError when a client request has no server line."""
    access = [s for s in server if s.get("logger") == "tachyon.serving.access" and s.get("ttft") is not None]
    by_tokens: dict[tuple[int, int], list[dict]] = {}
    for s in access:
        by_tokens.setdefault((s["prompt_tokens"], s["completion_tokens"]), []).append(s)
    answered = [c for c in client if c.get("first_byte") is not None and c.get("end") is not None]
    unique = [(c, by_tokens[k][0]) for c in answered
              if len(by_tokens.get(k := (c["prompt_tokens"], c["output_tokens"]), [])) == 1]
    if not unique:
        raise ValueError("no client request matches exactly one server access line by token counts")
    offset = statistics.median(s["ts"] - c["end"] for c, s in unique)
    rows = []
    for c in answered:
        cands = by_tokens.get((c["prompt_tokens"], c["output_tokens"]))
        if not cands:
            raise ValueError(f"client request {c['id']} ({c['prompt_tokens']} prompt tokens) has no server line")
        s = min(cands, key=lambda s: abs(s["ts"] - offset - c["end"]))
        rows.append(dict(id=c["id"], prompt_tokens=c["prompt_tokens"], sent=c["sent"],
                         client_ms=1e3 * (c["first_byte"] - c["sent"]), server_ms=1e3 * s["ttft"],
                         queue_ms=1e3 * (s.get("queue_time") or 0.0),
                         lag_ms=1e3 * (s["ts"] - s["duration"] - offset - c["sent"])))
    return sorted(rows, key=lambda r: r["sent"])


def _stats(xs: list[float]) -> str:
    return f"{statistics.mean(xs):6.1f} / {nearest_rank(xs, 90):6.1f} / {nearest_rank(xs, 99):6.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("client")
    ap.add_argument("server")
    ap.add_argument("--probe", action="append", default=[], metavar="JSON",
                    help="arrivals_probe.py output (with per-request TTFT) on the client log's arrivals; repeatable")
    ap.add_argument("--long-len", type=int, default=8192, help="prompts this long or longer are long")
    ap.add_argument("--slowest", type=int, default=12)
    args = ap.parse_args()
    rows = join(read_jsonl(args.client), read_jsonl(args.server))
    probes = {}
    for p in args.probe:
        d = json.loads(Path(p).read_text())
        probes[Path(p).stem] = {r["id"].removeprefix("a"): r["ttft_ms"] for r in d["requests"]}
    cols = ["client_ms", "server_ms", "queue_ms", "lag_ms"]
    print("TTFT parts, ms: mean / p90 / p99")
    for name, keep in (("short", lambda r: r["prompt_tokens"] < args.long_len),
                       ("long", lambda r: r["prompt_tokens"] >= args.long_len)):
        sel = [r for r in rows if keep(r)]
        if not sel:
            continue
        print(f"{name} ({len(sel)} requests)")
        for k in cols:
            print(f"  {k:22} {_stats([r[k] for r in sel])}")
        for tag, ttft in probes.items():
            print(f"  {'engine ' + tag:22} {_stats([ttft[r['id']] for r in sel])}")
    longs = [r["sent"] for r in rows if r["prompt_tokens"] >= args.long_len]
    short = sorted((r for r in rows if r["prompt_tokens"] < args.long_len), key=lambda r: r["client_ms"])
    print(f"slowest {args.slowest} short prompts: id, prompt tokens, ms since the last long prompt was sent, "
          f"client / server / queue / lag ms" + "".join(f" / {t}" for t in probes))
    for r in short[::-1][: args.slowest]:
        before = [t for t in longs if t <= r["sent"]]
        since = f"{1e3 * (r['sent'] - before[-1]):6.1f}" if before else "  none"
        extra = "".join(f" / {p[r['id']]:6.1f}" for p in probes.values())
        print(f"  {r['id']:>4} {r['prompt_tokens']:5d} {since}  {r['client_ms']:6.1f} / {r['server_ms']:6.1f} / "
              f"{r['queue_ms']:5.1f} / {r['lag_ms']:5.1f}{extra}")


if __name__ == "__main__":
    main()
