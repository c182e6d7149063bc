# Stop 60. On an H200: #3's acceptance steps (STEPS, default bs1_06,nano_7; acceptance.sh). On any other card:
# (1) cvt against cvt:asm on decode batches over spread contexts (attn_kv_fp8.py --widen-spread: s60a's mixed-launch
# timing found the decode kernel alone 42% slower under cvt:asm at 96 decodes over 200-1,600 keys, stop 58 found it
# faster at 96 x 1,024); (2) long_prefill_token_threshold 0 / 512 when all 256 nano256 requests arrive at once
# (arrivals_probe.py --rate 1000: does the cap cost an offline-like load throughput?). ~6 min on an H100.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s60b.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-bs1_06,nano_7}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/spread
(cd benchmarks/kernels && timeout 300 python3 attn_kv_fp8.py --out $OUT/spread --widen-spread) 2>&1 | grep "^|" \
  | tee $OUT/spread/table.md | tail -65
for t in 0 512 0 512; do
  timeout 120 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --rate 1000 --num 256 \
    --engine-arg long_prefill_token_threshold=$t --tag all$t --out /tmp/res/arrivals 2>&1 | f | tail -1 \
    | tee -a $OUT/arrivals_all.txt
done
