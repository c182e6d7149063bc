# Session 20: where lpt's time goes against fcfs on Qwen2.5-7B nano256: step_timeline.py under each policy (one run
# each), and lpt again with torch.profiler windows ($1, e.g. "200:203,420:425") over mixed and decode steps.
# Packed into $OUT/timeline20.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/timeline20.sh WINDOWS (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/timeline20
mkdir -p $R/prof
pack() { tar czf $OUT/timeline20.tgz -C $R .; }
for pol in fcfs lpt; do
  timeout 150 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --scheduling-policy $pol \
    --out $R 2>&1 | f | grep "total_s\|\"steps\"\|Error" | sed "s/^/$pol /"
  pack
done
timeout 150 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --scheduling-policy lpt \
  --profile-steps "$1" --out $R/prof 2>&1 | f | grep "total_s\|Error" | sed "s/^/lpt-prof /"
pack
