# One H200 call: the 7B nano256 step timeline with Triton compile logging, sampled at temperature 1 (the
# run where an unaligned sampler scratch compiled new variants mid-run) and greedy (as engine_smoke).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/verify.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
for t in "--temperature 1.0" ""; do
  timeout 100 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 $t --out $OUT > /dev/null 2>&1
done
python3 -c "
import json, glob
for f in sorted(glob.glob('$OUT/step_timeline_*.json')):
    d = json.load(open(f))
    print(f.split('/')[-1], round(d['total_s'], 2), 'compiles:', [c['kernel'][:40] for c in d['compiles']], d['by_kind'])
"
