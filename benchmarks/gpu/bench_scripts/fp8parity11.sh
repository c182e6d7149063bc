# Session 11: greedy parity of the FP8 engine (fast path, defaults) against the torch reference path built with the
# same FP8 weights (dequantizing, exact fp32 accumulation): Qwen3-0.6B one request at a time (FP8 GEMV) and four
# together (FP8 skinny GEMM), Qwen2.5-7B four together. Results packed into $OUT/fp8parity11.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/fp8parity11.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/fp8parity11
mkdir -p $R
for run in "qwen3-0.6b --parity-single _single" "qwen3-0.6b '' _batch4" "qwen2.5-7b '' _batch4"; do
  eval set -- $run
  timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes $1 --workloads bs1 --parity $2 --quantization fp8 \
    --tag _fp8parity$3 --out $R 2>&1 | grep "'check'\|identical" | cut -c1-400
  tar czf $OUT/fp8parity11.tgz -C $R .
done
