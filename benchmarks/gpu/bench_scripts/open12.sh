# Session 12's first H200 call: (1) GPU tests of the FP8 kernels (the RMSNorm / SiLU-and-mul kernels with the FP8
# quantization fused in, the wider-K FP8 GEMV candidates), the GEMV / skinny-GEMM and tuning files; (2) every
# workload with FP8 on both shapes (the fused quantization; the FP8 GEMV's new candidates); (3) bf16 sanity on
# the head after stop 17's review mends (checked on CPU only then): Qwen2.5-7B bs1 + seed8, Qwen3-0.6B bs1.
# Results packed into $OUT/open12.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/open12.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/open12
mkdir -p $R/smoke
pack() { tar czf $OUT/open12.tgz -C $R .; }
timeout 240 python3 -m pytest -q tests/test_kernels_fp8.py tests/test_kernels_gemv.py tests/test_kernels_tuning.py 2>&1 \
  | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --quantization fp8 --tag _fp8 --out $R/smoke \
  2>&1 | f | tail -3 | sed "s/^/fp8 /"
pack
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --quantization fp8 --tag _fp8 --out $R/smoke \
  2>&1 | f | tail -3 | sed "s/^/fp8 /"
pack
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 --tag _bf16 --out $R/smoke \
  2>&1 | f | tail -2 | sed "s/^/bf16 /"
pack
timeout 60 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --tag _bf16 --out $R/smoke \
  2>&1 | f | tail -1 | sed "s/^/bf16 /"
pack
