# One H200 call: decode attention fused with the qkv post-processing (TACHYON_FUSED_DECODE_ATTN), and the
# batch-1 GEMVs' PDL launch split from their early trigger (TACHYON_PDL_GEMV_TRIGGER_MAX_MB). GPU tests of
# the fused kernel and the decode attention; decode-step replays of both shapes per variant (2 rounds).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/decode_fused.sh  (carry .whl)
# V7 / V06 override the variant lists (benchmarks/gpu/step_ab.py syntax).
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/dfa
mkdir -p $R
[ -n "$SKIP_TESTS" ] || timeout 200 python3 -m pytest -q tests/test_kernels_decode_fused.py 2>&1 | tail -3 | tee $R/gpu_tests.txt
[ -n "$SKIP_TIMING" ] || timeout 120 python3 benchmarks/kernels/decode_fused_timing.py --out $R/timing 2>&1 \
  | grep -v -i warn | tail -12
timeout 300 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --out $R/step_ab_7b \
  --variants "${V7:-auto,fda=0,maxmb=300,maxmb=300+trigmb=160,trigmb=300}" 2>&1 | grep -v -i warn | tail -14
timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --out $R/step_ab_06b \
  --variants "${V06:-auto,fda=0}" 2>&1 | grep -v -i warn | tail -6
tar czf $OUT/dfa.tgz -C $R .
