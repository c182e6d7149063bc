# Session 10: the fused decode kernel (qkv_post + attention + inline merge in one) at batch 1, with and without
# its early tile and 64-key tiles, against the shipped batch-1 path (qkv_post + dedicated kernel + merge), in
# alternating rounds of one engine per shape (engine_gaps.py; the 0.6B engine as the acceptance run builds it).
# Results packed into $OUT/fused_bs1.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/fused_bs1.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/fused_bs1
mkdir -p $R
V=auto,fda=1+ftile=64:4:2,fda=1+ftile=64:4:2+fearly=1,fda=1+fearly=1,fda=1+ftile=64:4:2+fearly=1+merge=kernel
for run in "qwen3-0.6b 0 200" "qwen2.5-7b 4096 200"; do
  set -- $run
  mkdir -p $R/$1
  timeout $3 python3 benchmarks/gpu/engine_gaps.py --shape $1 --max-model-len $2 --no-profile --variants $V,$V \
    --out $R/$1 2>&1 | f | grep "tok/s" | cut -c1-110
done
tar czf $OUT/fused_bs1.tgz -C $R .
