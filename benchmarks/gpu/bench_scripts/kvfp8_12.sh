# Session 12: the e4m3 KV cache (kv_cache_dtype=fp8). (1) GPU tests: the FP8-cache kernel file, the attention /
# store / decode-fused files (their bf16 paths now widen cache reads to the query dtype: a no-op there);
# (2) Qwen2.5-7B every workload with bf16 weights + FP8 cache, then FP8 weights + FP8 cache.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/kvfp8_12.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/kvfp8_12
mkdir -p $R/smoke
pack() { tar czf $OUT/kvfp8_12.tgz -C $R .; }
timeout 240 python3 -m pytest -q -x tests/test_kernels_kv_fp8.py tests/test_kernels_decode_fused.py \
  tests/test_kernels.py -k "fp8 or attention or store or bf16" 2>&1 | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --kv-cache-dtype fp8 --tag _kvfp8 --out $R/smoke \
  2>&1 | f | grep -v "^{" | tail -4 | sed "s/^/kvfp8 /"
pack
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --quantization fp8 --kv-cache-dtype fp8 \
  --tag _fp8_kvfp8 --out $R/smoke 2>&1 | f | grep -v "^{" | tail -4 | sed "s/^/fp8+kvfp8 /"
pack
