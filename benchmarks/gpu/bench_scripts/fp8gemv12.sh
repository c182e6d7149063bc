# Session 12: the FP8 batch-1 GEMV's configs (gemv_sweep.py --fp8 --grid) on Qwen2.5-7B's projections at M = 1,
# the skinny GEMM's FP8 configs at M = 1 beside them, cuBLASLt for reference; input pre-quantized.
# Usage (device, repo root): bash benchmarks/gpu/bench_scripts/fp8gemv12.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/fp8gemv12
mkdir -p $R
timeout 420 python3 benchmarks/kernels/gemv_sweep.py --fp8 --grid --shapes qwen2.5-7b --ms 1 --out $R 2>&1 \
  | grep -v -i warn | tee $R/sweep.txt
tar czf $OUT/fp8gemv12.tgz -C $R .
