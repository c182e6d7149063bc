# Session 11, fourth FP8 call: the W8A8 skinny GEMM now feeds FP8 tiles to the tensor cores as they are
# (exact-accumulation layout by default; the swapped warpgroup-MMA layout joins under TACHYON_FP8_FAST_ACCUM=1).
# (1) FP8 GPU tests, (2) Qwen2.5-7B bs1 + seed8 + nano256 FP8, exact then fast accumulation, (3) Qwen3-0.6B FP8.
# Results packed into $OUT/fp8d_11.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/fp8d_11.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/fp8d_11
mkdir -p $R/smoke
pack() { tar czf $OUT/fp8d_11.tgz -C $R .; }
timeout 150 python3 -m pytest -q tests/test_kernels_fp8.py 2>&1 | grep -E "FAILED|passed|failed" | tee $R/gpu_tests.txt
pack
for fa in 0 1; do
  TACHYON_FP8_FAST_ACCUM=$fa timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --quantization fp8 \
    --tag _fp8_fa$fa --out $R/smoke 2>&1 | f | tail -3 | sed "s/^/fast_accum=$fa /"
  pack
done
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --quantization fp8 --tag _fp8 --out $R/smoke 2>&1 \
  | f | tail -3
pack
