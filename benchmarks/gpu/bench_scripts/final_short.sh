# One H200 call for little device time: both shapes' engine workloads (bs1, seed8, nano256; no baseline,
# no start-up, no tests) and the fused decode attention at bs1 against the shipped policy (decode-step
# replays, 1 round). Results go straight under $OUT, so a call cut short still returns what finished.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final_short.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
mkdir -p $OUT/smoke $OUT/ab_7b $OUT/ab_06b
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $OUT/smoke 2>&1 | grep -v -i warn | tail -4
timeout 90 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --out $OUT/smoke 2>&1 | grep -v -i warn | tail -4
timeout 70 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 1 --variants auto,fda=1 --out $OUT/ab_06b \
  2>&1 | grep -v -i warn | tail -2
timeout 80 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 --variants auto,fda=1 --out $OUT/ab_7b \
  2>&1 | grep -v -i warn | tail -2
