# Stop 58 (not run yet: no device time left): the FP8 tensor-core decode probe (benchmarks/gpu/attn_fp8_mma_probe.py)
# against the engine's e4m3 decode kernel, Qwen2.5-7B heads, 64 x 1,024 / 256 x 1,024 / 256 x 2,048 keys; graph-replayed
# µs and error against the reference per form. ~1-2 minutes, any card. Usage (device, repo root; carry .whl):
# TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s58c.sh
source benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p $OUT/fp8mma
timeout 300 python3 benchmarks/gpu/attn_fp8_mma_probe.py --out $OUT/fp8mma 2>&1 | grep -v -i warn | tail -40 \
  | tee $OUT/fp8mma/log.txt
