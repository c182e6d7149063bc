# Session 20: the offline LLM's admission order. `tachyon bench offline --backend tachyon --workload nano256` with
# scheduling_policy lpt (the new offline default: longest remaining output first, the running set capped so the
# batch stays flat) against fcfs (arrival order), alternating processes, two timed runs per load, nvidia-smi at
# 100 ms beside. Packed into $OUT/lpt20.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/lpt20.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/lpt20
mkdir -p $R/offline
pack() { tar czf $OUT/lpt20.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 100 \
  > $R/smi.csv 2>&1 &
SMI=$!
i=0
for run in "qwen2.5-7b fcfs" "qwen2.5-7b lpt" "qwen2.5-7b fcfs" "qwen2.5-7b lpt" "qwen3-0.6b fcfs" "qwen3-0.6b lpt"; do
  set -- $run
  i=$((i + 1))
  echo "$i $1 $2 start $(date +%H:%M:%S.%N)" >> $R/marks.txt
  timeout 150 $B bench offline --backend tachyon --model $1 --dummy --workload nano256 --repeats 2 \
    --engine-arg scheduling_policy=$2 --output $R/offline/${i}_$1_$2.json 2>&1 | f | grep "runs:\|Error\|error" \
    | sed "s/^/$i $1 $2 /" | tee -a $R/lpt.txt
  pack
done
kill $SMI
pack
