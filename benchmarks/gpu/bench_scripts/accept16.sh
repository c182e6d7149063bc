# Session 16: the acceptance configuration beside transformers at this session's head (the engine as at stop 21):
# Qwen3-0.6B bs1 (--repeats 5) and Qwen2.5-7B seed8 (--repeats 3), the first GPU run of transformers' whole-batch
# warm-up (Backend.warmup_requests = its batch size, stop 21, CPU-tested only): its first timed seed8 run should now
# land with the later ones. Packed into $OUT/accept16.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/accept16.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/accept16
mkdir -p $R/offline
pack() { tar czf $OUT/accept16.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
for run in "qwen3-0.6b bs1 150 5" "qwen2.5-7b seed8 300 3"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --repeats $4 \
    --output $R/offline/$2_$1.json --report-dir $R/offline 2>&1 | f | grep "runs:\|warm-up\|^| \(hf\|tachyon\) " \
    | sed "s/^/$1 $2 /"
  pack
done
