# Session 12, last check of the submitted head on the H200: the FP8-cache kernel tests and the fused decode
# kernel's bf16 tests (queries now clamped when widened to fp16 over an e4m3 cache), and Qwen2.5-7B nano256
# with bf16 weights + FP8 cache.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/kvlast12.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/kvlast12
mkdir -p $R/smoke
pack() { tar czf $OUT/kvlast12.tgz -C $R .; }
timeout 150 python3 -m pytest -q tests/test_kernels_kv_fp8.py tests/test_kernels_decode_fused.py -k "fp8 or bf16" 2>&1 \
  | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --kv-cache-dtype fp8 --workloads nano256 \
  --tag _kvfp8 --out $R/smoke 2>&1 | f | grep -v "^{" | tail -1 | sed "s/^/kvfp8 /"
pack
