# Session 13, after the cuBLASLt picks were reverted: Qwen3-0.6B and Qwen2.5-7B bs1 beside transformers in one run
# each (tachyon bench offline --backend hf,tachyon) at the submitted engine. Packed into $OUT/final13b.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final13b.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/final13b
mkdir -p $R/offline
pack() { tar czf $OUT/final13b.tgz -C $R .; }
for run in "qwen3-0.6b bs1 70" "qwen2.5-7b bs1 110"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output $R/offline/$2_$1.json \
    2>&1 | f | grep "^| \(hf\|tachyon\) " | head -2 | sed "s/^/$1 /"
  pack
done
