# One H200 call: B=2..8 fusions - SiLU in the down projection's swap-AB loads (TACHYON_SMALL_SILU) and split-K sums
# left to the next RMSNorm (TACHYON_DEFER_SPLITK). GPU tests of the GEMV / skinny-GEMM kernels; decode-step replays of
# both shapes with each off; the engine's bs1 / seed8 on both shapes.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/small_fusion_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 120 python3 -m pytest -q tests/test_kernels_gemv.py 2>&1 | tail -3
timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --variants auto,ssilu=0,defer=0,ssilu=0+defer=0 \
  --out $OUT/step_ab_7b 2>&1 | grep -v -i warn | tail -8
timeout 90 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --variants auto,ssilu=0+defer=0 \
  --out $OUT/step_ab_06b 2>&1 | grep -v -i warn | tail -4
mkdir -p $OUT/smoke
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 --tag _small_fusion \
  --out $OUT/smoke 2>&1 | grep -v -i warn | tail -3
