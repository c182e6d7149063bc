# One H200 call: persistent (one-wave, PDL-kept) batch-1 GEMVs and swap-AB skinny GEMMs. Standalone sweep of
# the shipped configs at several programs-per-SM caps, then decode-step replays (bs1, B=8) of both shapes
# under each cap, then the 7B engine's bs1 / seed8 with a guess at the best caps.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/persist_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 150 python3 benchmarks/kernels/gemv_sweep.py --shapes qwen2.5-7b --persist 0,2,4,6,8 --no-pick \
  --out $OUT/sweep 2>&1 | grep -v -i warn | tail -24
timeout 170 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b \
  --variants auto,persist2,persist4,persist6,persist8,spersist1,spersist2,spersist3 \
  --out $OUT/step_ab_7b 2>&1 | grep -v -i warn | tail -17
timeout 90 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --variants auto,persist4,persist8,spersist2 \
  --out $OUT/step_ab_06b 2>&1 | grep -v -i warn | tail -9
