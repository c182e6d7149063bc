# Session 18, one call after the test-suite changes (xdist workers with per-worker torch threads, a lock on the
# tiny-model cache, fewer CPU-only sampler draws) and the atomic write of the shapes' configs:
# (1) the GPU kernel tests through xdist, as `make test` now runs the suite; (2) the probes refactored at 199e9c7,
# once each (layout_probe --raw --own-pool, data_power on one shape); (3) every standard workload on each shape
# (engine_smoke.py; greedy parity on 0.6B), nvidia-smi beside. Packed into $OUT/final18.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final18.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/final18
mkdir -p $R/smoke
pack() { tar czf $OUT/final18.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 200 python3 -m pytest -q -n 8 tests/test_kernels*.py tests/engine/test_kept_rows.py \
  2>&1 | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
timeout 100 python3 benchmarks/gpu/layout_probe.py --raw --own-pool --kib --pads 0,256 --runs 2 \
  --out $R/layout_raw_pool.json 2>&1 | f | grep "pad\|Error" | tail -4
timeout 40 python3 benchmarks/gpu/data_power.py --shapes square8192 --data zeros,normal --seconds 1 \
  --out $R/data_power.json 2>&1 | f | tail -3
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 140 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $R/smoke 2>&1 | f | tail -3
pack
timeout 110 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $R/smoke 2>&1 | f | tail -4
kill $SMI
pack
