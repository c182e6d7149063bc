# Session 17, sixth call: how often does a process run Qwen3-0.6B bs1 in the slow mode, under the engine's default
# (expandable segments) and under torch's default allocator (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False,
# which the engine leaves alone)? Ten processes of each, alternating, --repeats 3. Packed into $OUT/expand17c.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/expand17c.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/expand17c
mkdir -p $R/offline
pack() { tar czf $OUT/expand17c.tgz -C $R .; }
for i in $(seq 1 10); do
  for v in expandable default; do
    e=(); [ $v = default ] && e=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False)
    env "${e[@]}" timeout 40 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 3 \
      --output $R/offline/bs1_${v}_$i.json --report-dir $R/offline 2>&1 | grep "runs:" | sed "s/^/$v $i /" \
      | tee -a $R/bs1.txt
  done
  pack
done
