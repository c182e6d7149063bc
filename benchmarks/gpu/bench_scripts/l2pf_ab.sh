# One H200 call: A/B of the per-layer L2 weight prefetch during attention (TACHYON_L2_PREFETCH_MB per
# layer) in the B=1 / 8 decode-step replays of both shapes, the engine's 7B bs1 / seed8 with it on, and the
# prefetch kernel's GPU test.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/l2pf_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 60 python3 -m pytest -q tests/test_kernels_prefetch.py 2>&1 | tail -2
timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --variants l2pf0,l2pf16,l2pf32,l2pf48 \
  --out $OUT/step_ab_7b 2>&1 | grep -v -i warn | tail -8
timeout 100 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --variants l2pf0,l2pf8,l2pf16,l2pf24,l2pf32 \
  --out $OUT/step_ab_06b 2>&1 | grep -v -i warn | tail -10
mkdir -p $OUT/smoke
TACHYON_L2_PREFETCH_MB=32 timeout 90 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 \
  --tag _l2pf32 --out $OUT/smoke 2>&1 | grep -v -i warn | tail -3
