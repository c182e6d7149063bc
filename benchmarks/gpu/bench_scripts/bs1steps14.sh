# Session 14, fourth and fifth calls: per-step timing of Qwen3-0.6B bs1 in one process per round (bs1_steps.py):
# is the slow mode (1,484-1,489 against 1,517-1,524 tok/s, bs1dist14) a per-process state or a stall? The fourth
# call (8 plain runs x 3 processes) found no slow run; this fifth one cycles plain runs, runs inside the GpuMeter and
# the bench's own timed path (backend.run).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/bs1steps14.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/bs1steps14
mkdir -p $R
for p in 1 2; do
  echo "process $p"
  timeout 60 python3 benchmarks/gpu/bs1_steps.py --model qwen3-0.6b --runs 15 --meter --out $R/steps_p$p.json 2>&1 \
    | grep -v -i warn | grep " ms"
  tar czf $OUT/bs1steps14.tgz -C $R .
done
