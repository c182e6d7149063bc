# One H200 call (prepared at stop 11, not yet run): the early exit of empty KV splits
# (TACHYON_DECODE_EARLY_EXIT) alone and with the fused decode attention at batch 1, against the shipped
# policy, in decode-step replays at 512 and 4,096-token contexts, both shapes; GPU tests of the decode
# kernels in both modes first.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/early_exit.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
mkdir -p $OUT/tests
for e in 0 1; do
  TACHYON_DECODE_EARLY_EXIT=$e timeout 150 python3 -m pytest -q tests/test_kernels_decode_fused.py \
    tests/test_kernels.py -k decode 2>&1 | tail -2 | tee $OUT/tests/early_exit_$e.txt
done
for shape in qwen2.5-7b qwen3-0.6b; do
  for ctx in 512 4096; do
    timeout 90 python3 benchmarks/gpu/step_ab.py --shapes $shape --context $ctx --rounds 2 \
      --variants "${VARIANTS:-auto,early=1,fda=1+early=1}" --out $OUT/${shape}_$ctx 2>&1 | grep -v -i warn | tail -6
  done
done
