# Stop 64. On an H200: #3's acceptance steps (STEPS, default nano_7; acceptance.sh). On any other card: is the load the
# reason the server's long-prefill-cap gain (stop 62, all 256 nano256 requests through HTTP: short p90 −13%) is smaller
# than the engine-alone probe's on the first 64 (stop 64 under fcfs: −61%)? arrivals_probe.py under fcfs on all 256
# nano256 requests at 4 a second, every 8th prompt 8,192 tokens (stop 62's load without HTTP), cap 0 / 512, each its
# own process. ~4 min on an H100. Results in $OUT/arrivals.txt and arrivals.tgz.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s64a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
for t in 0 512; do
  timeout 200 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --rate 4 --num 256 --long-every 8 \
    --long-len 8192 --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=$t \
    --engine-arg scheduling_policy=fcfs --tag fcfs256_lp$t --out /tmp/res/arrivals 2>&1 | f | tail -1 \
    | tee -a $OUT/arrivals.txt
  tar czf $OUT/arrivals.tgz -C /tmp/res arrivals
done
