# Stop 60. On an H200: #3's acceptance steps (STEPS, default bs1_06,nano_7; acceptance.sh). On any other card: why
# stop 58's cvt:asm widening lost in the mixed launch (s59d.sh: mixed_attn_tiles.py --kv-fp8), then
# long_prefill_token_threshold under arrivals (arrivals_probe.py, 7B, nano256 at 4 a second, every 8th prompt 8,192
# tokens; threshold 0 / 512 / 0 / 512, each its own process). ~6 min on an H100.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s60a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-bs1_06,nano_7}
  exit
fi
bash benchmarks/gpu/bench_scripts/s59d.sh
source benchmarks/gpu/bench_scripts/env.sh
for t in 0 512 0 512; do
  timeout 150 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --rate 4 --num 64 --long-every 8 \
    --long-len 8192 --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=$t \
    --tag lp$t --out /tmp/res/arrivals 2>&1 | f | tail -2 | tee -a $OUT/arrivals.txt
done
