# One H200 call, run first on a fresh machine: cold engine start-up (7B), engine speed on every standard
# workload for both shapes (with greedy parity against the torch reference path), the transformers
# baseline in the same run, the 7B nano256 step timeline, the sampler's timing table and its GPU tests.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 80 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $OUT 2>&1 | grep -v -i warn | tail -2
mkdir -p $OUT/smoke
timeout 140 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $OUT/smoke 2>&1 | grep -v -i warn | tail -5
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $OUT/smoke 2>&1 | grep -v -i warn | tail -6
for run in "qwen2.5-7b seed8 140" "qwen3-0.6b bs1 80"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output /tmp/res/$2_$1.json \
    --report-dir /tmp/res 2>&1 | grep -v "Loading weights" | tail -4
  cp /tmp/res/*.json /tmp/res/*.md $OUT/ 2>/dev/null
done
timeout 60 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --out $OUT 2>&1 \
  | grep -v -i warn | head -40
timeout 90 python3 benchmarks/kernels/sample_timing.py --out $OUT 2>&1 | grep -v -i warn | tail -24
timeout 120 python3 -m pytest -q tests/test_kernels_sampling.py tests/test_kernels_prefetch.py 2>&1 | tail -3
