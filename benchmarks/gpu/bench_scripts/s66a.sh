# Stop 66. On an H200: #3's acceptance steps (STEPS, default bs1_06; through s65c.sh). On any other card: s65c.sh
# (the server run at 4 a second with every 8th prompt 8,192 tokens, then the engine alone on stop 65's server
# arrivals, warmed), then why the server's first request paid 89 ms server-side against 22 engine-alone at stop 65:
# the engine alone on the first 32 of those arrivals with no warm-up request (--warmup 0), stepped on the thread that
# built it / on a fresh thread as the server's AsyncEngine does, without and with prepare_thread (PyTorch's per-thread
# GEMM handles; the server now runs it). The server (its log's "after start-up" warnings) and the probes
# (late_compile_events in their JSON) name every Triton compile after start-up. ~6 min on an H100.
# Results: serve.tgz, arrivals.tgz, late.txt, cold.txt.
# Needs .tok and .whl_serve carried with .whl (s60c.sh's header says how they are made).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s66a.sh
bash benchmarks/gpu/bench_scripts/s65c.sh
grep -q H200 $OUT/gpu.txt && exit
source benchmarks/gpu/bench_scripts/env.sh
zcat /tmp/res/serve/server.log.gz | grep "after start-up\|engine thread ready" | tee $OUT/late.txt | cut -c1-300 | head -8
LOG=benchmarks/results/session54/s64b_serve/serve_cap.requests.jsonl.gz
cold() {  # TAG THREAD_WARMUP [--engine-thread]
  TACHYON_THREAD_WARMUP=$2 timeout 120 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --num 32 \
    --long-every 8 --long-len 8192 --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=512 \
    --engine-arg scheduling_policy=fcfs --arrivals-from $LOG --min-tokens --warmup 0 $3 --tag $1 \
    --out /tmp/res/arrivals 2>&1 | f | tail -1 >> $OUT/arrivals.txt
}
cold cold_main 1
cold cold_thread_bare 0 --engine-thread
cold cold_thread_prepared 1 --engine-thread
python3 - <<'PY' | tee $OUT/cold.txt
import glob, json
for p in sorted(glob.glob("/tmp/res/arrivals/*cold*.json")):
    d = json.load(open(p))
    first = {r["id"]: r["ttft_ms"] for r in d["requests"] if r["id"] in ("a0", "a1", "a2", "a3")}
    print(p.split("/")[-1], "prepare_s", d["prepare_thread_s"], "late", d["late_compiles_run"], "first TTFT ms", first,
          "short mean", round(d.get("ttft_short_mean_ms", 0), 1), [e["kernel"] for e in d["late_compile_events"]][:6])
PY
tar czf $OUT/arrivals.tgz -C /tmp/res arrivals
