# Session 14, first call, at the submitted engine: (1) the GPU kernel tests; (2) the acceptance workloads beside
# transformers in one run each (tachyon bench offline --backend hf,tachyon: 7B bs1, 0.6B bs1, 7B seed8); (3) every
# standard workload on each shape (engine_smoke.py, one process per shape; greedy parity on 0.6B), nvidia-smi
# beside. Packed into $OUT/final14.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final14.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/final14
mkdir -p $R/offline $R/smoke
pack() { tar czf $OUT/final14.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
for run in "qwen2.5-7b bs1 120" "qwen3-0.6b bs1 70" "qwen2.5-7b seed8 120"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output $R/offline/$2_$1.json \
    --report-dir $R/offline 2>&1 | f | grep "^| \(hf\|tachyon\) " | head -2
  pack
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $R/smoke 2>&1 | f | tail -3
pack
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $R/smoke 2>&1 | f | tail -4
kill $SMI
pack
timeout 200 python3 -m pytest -q tests/test_kernels*.py tests/engine/test_kept_rows.py \
  2>&1 | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
