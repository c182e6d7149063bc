# The acceptance workloads beside transformers, each timed five times on one load per backend (tachyon bench offline
# --repeats 5: the median run is reported, every run kept in the JSON): Qwen3-0.6B bs1, Qwen2.5-7B bs1, Qwen2.5-7B
# seed8. Written at stop 20 after single 0.17-s bs1 runs were found to lose ~2% to one ~2-ms stall now and then
# (benchmarks/results/session14/). transformers takes ~6 min of the ~8 in all. Packed into $OUT/accept_repeats.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/accept_repeats.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/accept_repeats
mkdir -p $R/offline
pack() { tar czf $OUT/accept_repeats.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
for run in "qwen3-0.6b bs1 150" "qwen2.5-7b bs1 200" "qwen2.5-7b seed8 230"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --repeats 5 \
    --output $R/offline/$2_$1.json --report-dir $R/offline 2>&1 | f | grep "runs:\|^| \(hf\|tachyon\) " | sed "s/^/$1 $2 /"
  pack
done
