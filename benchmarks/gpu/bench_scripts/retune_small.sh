# One H200 call: the skinny-GEMM (M = SMALL_M) sweep over the widened candidate list, then engines whose
# warm-up re-tunes those choices (user cache under $OUT/tcache, brought back to ship), their B=1 / 8
# step replays, the 7B bs1 / seed8 workloads, and the sampler's timing table at the new bin count.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/retune_small.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA TACHYON_CACHE_DIR=$OUT/tcache
mkdir -p $OUT/smoke $OUT/tcache
timeout 150 python3 benchmarks/kernels/gemv_sweep.py --ms 8 --out $OUT/sweep 2>&1 | grep -v -i warn | tail -10
timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --variants auto --out $OUT/step_ab_7b 2>&1 | grep -v -i warn | tail -2
timeout 90 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --variants auto --out $OUT/step_ab_06b 2>&1 | grep -v -i warn | tail -2
timeout 90 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 --out $OUT/smoke 2>&1 | grep -v -i warn | tail -3
timeout 120 python3 benchmarks/kernels/sample_timing.py --out $OUT/sample 2>&1 | grep -v -i warn | grep "top_p\|B=   8" | tail -12
