# Stop 65. On an H200: #3's acceptance steps (STEPS, default nano_7; acceptance.sh). On any other card: is min_tokens
# the server's extra TTFT? `bench serve` sends min_tokens = max_tokens (with ignore_eos), the engine-alone probe sent
# none; s65a.sh's cap-512 run again on stop 65's server arrivals, with min_tokens = max_tokens. ~2.5 min on an H100.
# Results in $OUT/arrivals.txt and arrivals.tgz (per-request TTFT in the JSON).
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s65b.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
LOG=benchmarks/results/session54/s64b_serve/serve_cap.requests.jsonl.gz
timeout 240 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --num 256 --long-every 8 --long-len 8192 \
  --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=512 --engine-arg scheduling_policy=fcfs \
  --arrivals-from $LOG --min-tokens --tag server_arrivals_lp512_min --out /tmp/res/arrivals 2>&1 | f | tail -1 \
  | tee -a $OUT/arrivals.txt
tar czf $OUT/arrivals.tgz -C /tmp/res arrivals
