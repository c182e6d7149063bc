# One H200 call: per-kernel contributions of replayed decode steps (benchmarks/gpu/step_trace.py) for the
# variants in TV (default: the shipped policy vs the fused decode attention at bs1), batches TB, sampling
# modes TS (greedy,top_p), both shapes; then the
# shipped defaults against the previous ones in step replays (7B).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/trace.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/trace
mkdir -p $R
for shape in qwen2.5-7b qwen3-0.6b; do
  timeout 150 python3 benchmarks/gpu/step_trace.py --shape $shape --variants "${TV:-auto,fda=1}" --batches "${TB:-1}" --sampling "${TS:-greedy}" --out $R 2>&1 \
    | grep -v -i warn | tail -4
done
[ -n "$SKIP_AB" ] || timeout 200 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --out $R/step_ab_7b \
  --variants "auto,fda=0+maxmb=160+strig=100000" 2>&1 | grep -v -i warn | tail -4
tar czf $OUT/trace.tgz -C $R .
