# Stop 58: where the e4m3 cache's cvt:asm widening starts to pay (attention_config.KV8_SPLIT_WIDEN_MIN_PROGRAMS_PER_SM):
# attn_kv_fp8.py --widen-batches (decode at 1,024 keys, batches 64-256, cvt against cvt:asm), then the kv-fp8 kernel
# tests with the default widening. ~2 minutes, any card. Usage (device, repo root; carry .whl):
# TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s58b.sh
source benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p $OUT/kvb
(cd benchmarks/kernels && timeout 240 python3 attn_kv_fp8.py --out $OUT/kvb --widen-batches) 2>&1 | tail -16 \
  | tee $OUT/kvb/batches.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_kv_fp8.py -k "default or widen" 2>&1 | tail -4 \
  | tee $OUT/kvb/tests.txt
