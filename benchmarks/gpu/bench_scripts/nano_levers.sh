# Qwen2.5-7B nano256's levers, measured in one H200 call: decode steps replayed with every row at the same context
# against rows spread uniformly around it (same mean: does the decode attention lose to uneven rows?), then the
# kernels of one 8,192-token prefill step. Results in $OUT/nano_levers.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/nano_levers.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/nano_levers
mkdir -p $R
for spread in 0 ${TSPREAD:-550}; do
  timeout 150 python3 benchmarks/gpu/step_trace.py --shape qwen2.5-7b --batches "${TB:-256,160,96}" --context "${TC:-650}" \
    --context-spread $spread --out $R 2>&1 | grep -v -i warn | grep "us/step" | cut -c1-230
done
timeout 150 python3 benchmarks/gpu/prefill_trace.py --shape qwen2.5-7b --out $R 2>&1 | grep -v -i warn | tail -16
tar czf $OUT/nano_levers.tgz -C $R .
