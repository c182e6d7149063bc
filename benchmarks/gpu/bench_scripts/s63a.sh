# Stop 63. On an H200: #3's acceptance steps (STEPS, default nano_7; acceptance.sh). On any other card: does the
# scheduling policy explain why stop 60's engine-alone probe measured a larger long-prefill-cap gain than the server
# (stop 62)? Stop 60's probe ran under `LLM`'s CUDA default, flat; the server runs fcfs. arrivals_probe.py on its
# stop-60 load (7B, the first 64 nano256 requests at 4 a second, every 8th prompt 8,192 tokens), cap 0 / 512 under
# fcfs, flat, fcfs (POLICIES; each its own process). ~5 min on an H100. Results in $OUT/arrivals.txt and arrivals.tgz.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] [POLICIES="fcfs flat"] bash benchmarks/gpu/bench_scripts/s63a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
for pol in ${POLICIES:-fcfs flat fcfs}; do
  for t in 0 512; do
    timeout 150 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --rate 4 --num 64 --long-every 8 \
      --long-len 8192 --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=$t \
      --engine-arg scheduling_policy=$pol --tag ${pol}_lp$t --out /tmp/res/arrivals 2>&1 | f | tail -1 \
      | tee -a $OUT/arrivals.txt
    tar czf $OUT/arrivals.tgz -C /tmp/res arrivals
  done
done
