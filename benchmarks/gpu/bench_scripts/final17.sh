# Session 17, first call, at the submitted engine (unchanged since stop 21 but for the loader's opt-in dummy-init
# knob): (1) the GPU kernel tests (last run in session 14); (2) every standard workload on each shape
# (engine_smoke.py, one process per shape; greedy parity on 0.6B), nvidia-smi beside. Packed into $OUT/final17.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final17.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/final17
mkdir -p $R/smoke
pack() { tar czf $OUT/final17.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 220 python3 -m pytest -q tests/test_kernels*.py tests/engine/test_kept_rows.py \
  2>&1 | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 140 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $R/smoke 2>&1 | f | tail -3
pack
timeout 110 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $R/smoke 2>&1 | f | tail -4
kill $SMI
pack
