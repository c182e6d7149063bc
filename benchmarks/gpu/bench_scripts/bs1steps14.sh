# Session 14, fourth call: per-step timing of Qwen3-0.6B bs1, eight runs in each of three processes
# (bs1_steps.py): is the slow mode (1,484-1,489 against 1,517-1,524 tok/s, bs1dist14) a per-process state or a
# stall? Packed into $OUT/bs1steps14.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/bs1steps14.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/bs1steps14
mkdir -p $R
for p in 1 2 3; do
  echo "process $p"
  timeout 60 python3 benchmarks/gpu/bs1_steps.py --model qwen3-0.6b --runs 8 --out $R/steps_p$p.json 2>&1 \
    | grep -v -i warn | grep " ms, "
  tar czf $OUT/bs1steps14.tgz -C $R .
done
