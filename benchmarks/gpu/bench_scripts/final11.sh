# Session 11's closing H200 call, on a fresh machine: (1) Qwen2.5-7B engine start-up with an empty Triton cache
# (the warm-up's parallel compile pass now covers the unfiltered-sampling twins and every prefill-graph token
# bucket), (2) GPU tests of the FP8 and GEMV / skinny-GEMM kernels (the skinny GEMM moved to gemm_small.py),
# (3) Qwen2.5-7B every workload with FP8 at its defaults (fast accumulation), (4) bf16 sanity: Qwen2.5-7B bs1 +
# seed8, Qwen3-0.6B bs1. Results packed into $OUT/final11.tgz as they come.
# Usage (device, repo root, fresh machine): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final11.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/final11
mkdir -p $R/startup $R/smoke
pack() { tar czf $OUT/final11.tgz -C $R .; }
timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup 2>&1 | grep -v -i warn | tail -1
pack
timeout 200 python3 -m pytest -q tests/test_kernels_fp8.py tests/test_kernels_gemv.py 2>&1 | grep -E "FAILED|passed|failed" \
  | tee $R/gpu_tests.txt
pack
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --quantization fp8 --tag _fp8 --out $R/smoke \
  2>&1 | f | tail -3 | sed "s/^/fp8 /"
pack
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 --tag _bf16 --out $R/smoke \
  2>&1 | f | tail -2 | sed "s/^/bf16 /"
pack
timeout 80 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --tag _bf16 --out $R/smoke \
  2>&1 | f | tail -1 | sed "s/^/bf16 /"
pack
