# Where Qwen2.5-7B nano256's time goes at the current tree: the per-step timeline with each step's GPU wait
# (host-bound steps show wait ~ 0), then per-kernel contributions of replayed decode steps at the batch sizes the
# run passes through (TB, default 256,160,96,32) at a TC-token context (default 1024). Results in $OUT/nano_profile.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/nano_profile.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/nano_profile
mkdir -p $R
timeout 200 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --out $R > $R/timeline.txt 2>&1
python3 - $R/step_timeline_qwen2.5-7b_nano256.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("total_s", round(d["total_s"], 3), {k: (v["steps"], round(v["ms"])) for k, v in d["by_kind"].items()})
for b, v in d["by_bucket"].items():
    print(f"bucket {b}: {v['steps']} steps, {v['mean_ms']:.2f} ms, host {v['mean_host_ms']:.2f} ms, rows {v['rows'] / v['steps']:.0f}")
PY
[ -n "$SKIP_TRACE" ] || timeout 200 python3 benchmarks/gpu/step_trace.py --shape qwen2.5-7b --batches "${TB:-256,160,96,32}" \
  --context "${TC:-1024}" --out $R 2>&1 | grep -v -i warn | tail -5
tar czf $OUT/nano_profile.tgz -C $R .
