# Stop 65. On an H200: #3's acceptance steps (STEPS, default nano_7; acceptance.sh). On any other card: the engine
# alone on the very arrivals of stop 65's server run (session54/s64b_serve: all 256 nano256 requests at 4 a second,
# every 8th prompt 8,192 tokens, through `tachyon serve` with the default cap 512), now that arrivals_probe.py stamps
# each request with its scheduled arrival: cap 512 (the server's setting) and cap 0, fcfs, each its own process.
# ~4 min on an H100. Results in $OUT/arrivals.txt and arrivals.tgz (per-request TTFT in each JSON).
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s65a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
LOG=benchmarks/results/session54/s64b_serve/serve_cap.requests.jsonl.gz
for t in 512 0; do
  timeout 240 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --num 256 --long-every 8 \
    --long-len 8192 --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=$t \
    --engine-arg scheduling_policy=fcfs --arrivals-from $LOG --tag server_arrivals_lp$t --out /tmp/res/arrivals \
    2>&1 | f | tail -1 | tee -a $OUT/arrivals.txt
  tar czf $OUT/arrivals.tgz -C /tmp/res arrivals
done
