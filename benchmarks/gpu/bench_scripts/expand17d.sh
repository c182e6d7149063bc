# Session 17, seventh call: Qwen3-0.6B bs1 as the acceptance run does it, transformers first in the same process
# (its leftovers act as a start-up pad), under the engine's default (expandable segments) and torch's default
# allocator, three processes each, alternating; --repeats 2, --warmup-max-tokens 32. Packed into $OUT/expand17d.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/expand17d.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/expand17d
mkdir -p $R/offline
pack() { tar czf $OUT/expand17d.tgz -C $R .; }
for i in 1 2 3; do
  for v in expandable default; do
    e=(); [ $v = default ] && e=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False)
    env "${e[@]}" timeout 75 $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload bs1 \
      --repeats 2 --warmup-max-tokens 32 --output $R/offline/bs1_${v}_$i.json --report-dir $R/offline 2>&1 \
      | grep "runs:" | sed "s/^/$v $i /" | tee -a $R/bs1.txt
    pack
  done
done
