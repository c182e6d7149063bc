# Session 15 (stop 21), closing call at the submitted engine (its one engine change since stop 19: two persistent
# completion events; the heap freeze is the bench's and the server's): (1) every standard workload on each shape
# (engine_smoke.py, one process per shape; greedy parity on 0.6B), nvidia-smi beside; (2) `tachyon serve` on the 7B
# shape (heap frozen at start-up) under 48 concurrent requests over every sampling path plus an invalid one, then
# concurrency 1 and 32 (serve_smoke.sh). The acceptance workloads beside transformers ran in accept_repeats (this
# session's third call). Packed into $OUT/final15.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final15.sh (carry .whl, .tok)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/final15
mkdir -p $R/smoke
pack() { cp /tmp/res/serve_smoke.* /tmp/res/server.log $R/ 2>/dev/null; tar czf $OUT/final15.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 130 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $R/smoke 2>&1 | f | tail -3
pack
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $R/smoke 2>&1 | f | tail -4
kill $SMI
pack
timeout 260 bash benchmarks/gpu/bench_scripts/serve_smoke.sh 2>&1 | tail -14
pack
