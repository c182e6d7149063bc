# The two questions stop 16 left open, in one call (about 4 minutes): (1) do the unfiltered-sampling twin graphs
# help at engine_smoke's configuration (max_model_len 4,096)? engine_gaps.py, 0.6B and 7B bs1, twins on / off
# (TACHYON_UNFILTERED_GRAPHS), alternating. (2) does the fused decode kernel's early tile help where that kernel
# runs (B >= 2)? step_trace.py replays at B = 8 and 64 (greedy and top-p), early tile off / on, both shapes,
# 512- and 2,048-token contexts. Results packed into $OUT/open10.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/open10.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/open10
mkdir -p $R
for shape in qwen3-0.6b qwen2.5-7b; do
  mkdir -p $R/gaps_$shape
  timeout 120 python3 benchmarks/gpu/engine_gaps.py --shape $shape --max-model-len 4096 --no-profile \
    --variants auto,ugraph=0,auto,ugraph=0 --out $R/gaps_$shape 2>&1 | f | grep "tok/s" | cut -c1-90
done
tar czf $OUT/open10.tgz -C $R .
for shape in qwen3-0.6b qwen2.5-7b; do
  for ctx in 512 2048; do
    mkdir -p $R/trace_${shape}_$ctx
    timeout 120 python3 benchmarks/gpu/step_trace.py --shape $shape --context $ctx --batches 8,64 \
      --sampling greedy,top_p --variants auto,fearly=1,auto,fearly=1 --out $R/trace_${shape}_$ctx 2>&1 | f \
      | grep "us/step" | cut -c1-70
  done
done
tar czf $OUT/open10.tgz -C $R .
