# One H200 call: the batch-1 qkv GEMV that finishes qkv_post in its epilogue (TACHYON_QKV_POST_GEMV), on the
# Qwen2.5-7B shape (no q/k norm): GPU tests of the kernel and the GEMVs, decode-step replays at a 512-token
# context (off / on / on with the RMSNorm in the same GEMV's prologue, two configs; 2 interleaved rounds),
# then the engine's 7B bs1 and seed8.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/qkv_post_gemv.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 150 python3 -m pytest -q tests/test_kernels_gemv_qkv.py tests/test_kernels_gemv.py 2>&1 | tail -3 \
  | tee $OUT/gpu_tests.txt
timeout 240 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 2 \
  --variants "${VARIANTS:-qkvpost=0,auto,fused.qkv_proj=2:2048:4:1,fused.qkv_proj=16:512:8:2}" --out $OUT/ab7b \
  2>&1 | grep -v -i warn | tail -9
mkdir -p $OUT/smoke
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 --out $OUT/smoke \
  2>&1 | grep -v -i warn | tail -4
