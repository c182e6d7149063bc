# Session 20: lpt's due-soon share (TACHYON_LPT_DUE_SOON: 0.9, the default, against 0.75: fewer, larger admission
# steps, a running set further over the cap) beside fcfs, `tachyon bench offline --backend tachyon --workload
# nano256`, one process each, two timed runs per load. Packed into $OUT/lpt20d.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/lpt20d.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/lpt20d
mkdir -p $R/offline
pack() { tar czf $OUT/lpt20d.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
i=0
for run in "qwen2.5-7b fcfs 0.9" "qwen2.5-7b lpt 0.75" "qwen2.5-7b lpt 0.9" "qwen3-0.6b fcfs 0.9" "qwen3-0.6b lpt 0.75"; do
  set -- $run
  i=$((i + 1))
  TACHYON_LPT_DUE_SOON=$3 timeout 150 $B bench offline --backend tachyon --model $1 --dummy --workload nano256 \
    --repeats 2 --engine-arg scheduling_policy=$2 --output $R/offline/${i}_$1_$2_$3.json 2>&1 | f \
    | grep "runs:\|Error\|error" | sed "s/^/$i $1 $2 $3 /" | tee -a $R/lpt.txt
  pack
done
