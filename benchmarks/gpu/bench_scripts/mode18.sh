# Session 18: how often Qwen3-0.6B bs1 lands in its slow mode as the acceptance run measures it (transformers first
# in the same process, torch's default allocator, the submitted engine): nine processes of `bench offline
# --backend hf,tachyon --repeats 2 --warmup-max-tokens 32`. Packed into $OUT/mode18.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/mode18.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/mode18
mkdir -p $R/offline
pack() { tar czf $OUT/mode18.tgz -C $R .; }
for i in 1 2 3 4 5 6 7 8 9; do
  timeout 75 $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload bs1 \
    --repeats 2 --warmup-max-tokens 32 --output $R/offline/bs1_$i.json --report-dir $R/offline 2>&1 \
    | grep "runs:" | grep tachyon | sed "s/^/$i /" | tee -a $R/bs1.txt
  pack
done
