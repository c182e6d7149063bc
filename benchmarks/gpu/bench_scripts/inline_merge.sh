# One H200 call: the inline split merge (TACHYON_DECODE_MERGE: the last split program of each (sequence,
# KV head) merges, no merge kernel). VARIANTS default: the shipped policy (fused decode kernel merges inline,
# empty splits counting in), with the early exit of empty splits (early=1), and with the merge kernel
# (merge=kernel), in decode-step replays at 512 and 4,096-token contexts, both shapes; the GPU tests of
# the decode kernels (every merge mode) first. Results straight under $OUT.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/inline_merge.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
mkdir -p $OUT/tests
timeout 200 python3 -m pytest -q -x tests/test_kernels_decode_fused.py tests/test_kernels.py tests/test_kernels_gemv.py \
  -k "decode or split or gemm_small" \
  2>&1 | tail -3 | tee $OUT/tests/decode_tests.txt
for shape in qwen2.5-7b qwen3-0.6b; do
  for ctx in 512 4096; do
    timeout 100 python3 benchmarks/gpu/step_ab.py --shapes $shape --context $ctx --rounds 2 \
      --variants "${VARIANTS:-auto,early=1,merge=kernel}" --out $OUT/${shape}_$ctx 2>&1 \
      | grep -v -i warn | tail -12
  done
done
