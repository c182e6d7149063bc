# One H200 call (session 8): the Qwen3-0.6B changes against the stop-13 choices in the same process (step
# replays: the tied lm_head through the tuned Linear instead of cuBLAS + conversion, and the step-measured
# whole-row down projection), then 0.6B bs1 beside transformers (tachyon bench offline), greedy parity with the
# torch reference path, and the engine's other 0.6B workloads. The tuner's fresh decisions (the tied head's
# 151936x1024 keys) come back in cache/kernel_tuning.json for the shipped table.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/tied_head.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA TACHYON_CACHE_DIR=$OUT/cache
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
OLD=gemv.down_proj=2:2048:4:1+gemv.lm_head=cublas+small.lm_head=cublas
timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 2 --out $OUT/ab \
  --variants auto,$OLD,gemv.lm_head=cublas,gemv.down_proj=2:2048:4:1 2>&1 | f | tail -8
timeout 120 $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload bs1 \
  --output $OUT/offline/bs1_qwen3-0.6b.json --report-dir $OUT/offline 2>&1 | f | tail -4
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --parity-single --out $OUT/smoke \
  2>&1 | f | grep -v "^{" | tail -8
