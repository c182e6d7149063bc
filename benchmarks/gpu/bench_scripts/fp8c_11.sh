# Session 11, third FP8 call: the W8A8 skinny GEMM (2..8 rows) added. (1) GPU tests: FP8 kernels and the bf16
# GEMV / skinny-GEMM tests (their kernels gained the FP8 branch), (2) Qwen2.5-7B bs1 + seed8 FP8 and bf16,
# (3) Qwen3-0.6B every workload FP8 and bf16 (one process per configuration).
# Results packed into $OUT/fp8c_11.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/fp8c_11.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/fp8c_11
mkdir -p $R/smoke
pack() { tar czf $OUT/fp8c_11.tgz -C $R .; }
timeout 200 python3 -m pytest -q tests/test_kernels_fp8.py tests/test_kernels_gemv.py 2>&1 | grep -E "FAILED|passed|failed" \
  | tee $R/gpu_tests.txt
pack
for q in fp8 bf16; do
  Q=$([ $q = fp8 ] && echo "--quantization fp8")
  timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 $Q --tag _$q \
    --out $R/smoke 2>&1 | f | tail -2 | sed "s/^/$q /"
  pack
  timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b $Q --tag _$q --out $R/smoke 2>&1 | f \
    | tail -3 | sed "s/^/$q /"
  pack
done
