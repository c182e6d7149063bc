# Session 15 (stop 21): (1) hf_warm_probe.py on 7B bs1: why plain transformers' first full-length run after the
# bench's old 4-token warm-up was ~3x slower than the next ones (allocator, clocks or host); (2) the acceptance
# workloads beside transformers with the new warm-up (offline.warmup_workload: the first four requests at full
# length), each timed five times on one load per backend: is transformers' first timed run now like the others?
# Packed into $OUT/accept15.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/accept15.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/accept15
mkdir -p $R/offline
pack() { tar czf $OUT/accept15.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 120 python3 benchmarks/gpu/hf_warm_probe.py --model qwen2.5-7b --workload bs1 --runs 4 --out $R/hf_warm.json \
  2>&1 | f | grep "^{"
pack
for run in "qwen3-0.6b bs1 150" "qwen2.5-7b bs1 200" "qwen2.5-7b seed8 230"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --repeats 5 \
    --output $R/offline/$2_$1.json --report-dir $R/offline 2>&1 | f | grep "runs:\|warm-up\|^| \(hf\|tachyon\) " \
    | sed "s/^/$1 $2 /"
  pack
done
