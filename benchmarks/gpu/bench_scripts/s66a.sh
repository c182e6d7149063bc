# Stop 66. On an H200: #3's acceptance steps (STEPS, default bs1_06; through s65c.sh). On any other card: s65c.sh
# (the server run at 4 a second with every 8th prompt 8,192 tokens, then the engine alone on stop 65's server
# arrivals, warmed), plus the engine alone on the same arrivals with no warm-up request (--warmup 0), so its first
# request pays what start-up left cold, as the server's first does (89 ms server-side against 22 engine-alone at stop
# 65). Both the server (its log's "after start-up" warnings) and the probes (late_compile_events in their JSON) now
# name every Triton compile after start-up. ~5.5 min on an H100. Results: serve.tgz, arrivals.tgz, late.txt.
# Needs .tok and .whl_serve carried with .whl (s60c.sh's header says how they are made).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s66a.sh
bash benchmarks/gpu/bench_scripts/s65c.sh
grep -q H200 $OUT/gpu.txt && exit
source benchmarks/gpu/bench_scripts/env.sh
zcat /tmp/res/serve/server.log.gz | grep "after start-up" | tee $OUT/late.txt | cut -c1-300 | head -8
LOG=benchmarks/results/session54/s64b_serve/serve_cap.requests.jsonl.gz
timeout 150 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --num 256 --long-every 8 --long-len 8192 \
  --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=512 --engine-arg scheduling_policy=fcfs \
  --arrivals-from $LOG --min-tokens --warmup 0 --tag cold_lp512_min --out /tmp/res/arrivals 2>&1 | f | tail -1 \
  | tee -a $OUT/arrivals.txt
tar czf $OUT/arrivals.tgz -C /tmp/res arrivals
