# (Ran at 011e9b5, when alloc_probe.py called the engine's allocator module; it now calls torch's setter itself.)
# Session 17, fifth call: does the engine's runtime allocator call work on the device's torch (2.11)? alloc_probe.py
# with the engine's call and with PYTORCH_CUDA_ALLOC_CONF (torch's start-up route); then Qwen3-0.6B bs1 in eight
# separate processes (--repeats 3), alternating the engine's default and the variable. Packed into $OUT/expand17b.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/expand17b.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/expand17b
mkdir -p $R/offline
pack() { tar czf $OUT/expand17b.tgz -C $R .; }
python3 benchmarks/gpu/alloc_probe.py 2>&1 | tee $R/probe_engine.txt
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 benchmarks/gpu/alloc_probe.py 2>&1 | tee $R/probe_env.txt
pack
for i in 1 2 3 4; do
  for v in engine env; do
    e=(); [ $v = env ] && e=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)
    env "${e[@]}" timeout 60 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 3 \
      --output $R/offline/bs1_${v}_$i.json --report-dir $R/offline 2>&1 | grep -i "runs:\|allocator" \
      | sed "s/^/$v $i /" | tee -a $R/bs1.txt
    pack
  done
done
