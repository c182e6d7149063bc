# One H200 call: the 7B nano256 step timeline with Triton compile logging (after stride_bt stopped being
# specialised), then the Qwen3-0.6B workloads with greedy parity (its JSON was cut from final.sh's output).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/verify.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 100 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --out $OUT 2>&1 \
  | grep -v -i warn | head -30
mkdir -p $OUT/smoke
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $OUT/smoke 2>&1 | grep -v -i warn | tail -6
