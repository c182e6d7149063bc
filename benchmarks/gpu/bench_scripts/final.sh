# One H200 call: GPU kernel tests, engine speed on every standard workload for both shapes (with greedy
# parity against the torch reference path), and the transformers baseline in the same run.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 80 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py -k "sampling or attention" 2>&1 | tail -3
timeout 60 python3 benchmarks/kernels/sample_paths_check.py 2>&1 | grep -v -i warn
mkdir -p $OUT/smoke
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $OUT/smoke 2>&1 | grep -v -i warn | tail -5
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $OUT/smoke 2>&1 | grep -v -i warn | tail -6
for run in "qwen2.5-7b seed8 150" "qwen3-0.6b bs1 90"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output /tmp/res/$2_$1.json \
    --report-dir /tmp/res 2>&1 | grep -v "Loading weights" | tail -4
done
cp /tmp/res/*.json /tmp/res/*.md $OUT/ 2>/dev/null
