# Session 17: every acceptance workload that has a transformers baseline, beside it in one run each, at the submitted
# engine: Qwen2.5-7B bs1 and seed8 (--repeats 3), Qwen3-0.6B bs1 (--repeats 5). Packed into $OUT/accept17.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/accept17.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/accept17
mkdir -p $R/offline
pack() { tar czf $OUT/accept17.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
for run in "qwen3-0.6b bs1 150 5" "qwen2.5-7b seed8 240 3" "qwen2.5-7b bs1 200 3"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --repeats $4 \
    --output $R/offline/$2_$1.json --report-dir $R/offline 2>&1 | f | grep "runs:\|warm-up\|^| \(hf\|tachyon\) " \
    | sed "s/^/$1 $2 /"
  pack
done
