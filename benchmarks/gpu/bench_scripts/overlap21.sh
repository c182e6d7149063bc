# Session 21, fourth call: overlap_probe.py (serial / split / two-stream overlapped 7B decode layers at the power cap),
# then the bs1 / seed8 figures of the new default engine (mixed graphs on), `tachyon bench offline --backend tachyon`.
# Packed into $OUT/overlap21.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/overlap21.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/overlap21
mkdir -p $R/offline
pack() { tar czf $OUT/overlap21.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 150 python3 benchmarks/gpu/overlap_probe.py --batches 256,192 --out $R 2>&1 | f | tee $R/overlap_probe.txt
pack
for run in "qwen3-0.6b bs1 5" "qwen2.5-7b bs1 3" "qwen2.5-7b seed8 3"; do
  set -- $run
  timeout 80 $B bench offline --backend tachyon --model $1 --dummy --workload $2 --repeats $3 \
    --output $R/offline/$1_$2.json 2>&1 | f | grep "runs:\|Error\|error" | sed "s/^/$1 $2 /" | tee -a $R/figures.txt
  pack
done
