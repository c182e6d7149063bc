# Session 21, second call: mixed_check.py with the same-padded-step oracle (7B first: its start-up cold), then
# `tachyon bench offline --backend tachyon --workload nano256 --repeats 2` per (shape, policy, TACHYON_LPT_DUE_SOON,
# mixed_graph_max_tokens), one process each, then step_timeline.py of 7B lpt (due-soon $1). Packed into
# $OUT/mixed21b.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/mixed21b.sh 1.0 (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/mixed21b
mkdir -p $R/offline $R/timeline
pack() { tar czf $OUT/mixed21b.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 200 python3 benchmarks/gpu/mixed_check.py --shapes qwen2.5-7b,qwen3-0.6b --out $R 2>&1 | f \
  | tee $R/mixed_check.txt | grep -v "^  {" | head -5
grep -o "'key'.*'ok': [A-Za-z]*" $R/mixed_check.txt | sed "s/'argmax_agree_eager'.*'ok'/ok/"
pack
i=0
for run in "qwen2.5-7b fcfs 0.9 1024" "qwen2.5-7b lpt 1.0 1024" "qwen2.5-7b lpt 0.9 1024" "qwen2.5-7b lpt 0.9 0" \
           "qwen3-0.6b fcfs 0.9 1024" "qwen3-0.6b lpt 1.0 1024" "qwen3-0.6b lpt 0.9 1024"; do
  set -- $run
  i=$((i + 1))
  TACHYON_LPT_DUE_SOON=$3 timeout 100 $B bench offline --backend tachyon --model $1 --dummy --workload nano256 \
    --repeats 2 --engine-arg scheduling_policy=$2 --engine-arg mixed_graph_max_tokens=$4 \
    --output $R/offline/${i}_$1_$2_$3_$4.json 2>&1 | f \
    | grep "runs:\|Error\|error" | sed "s/^/$i $1 $2 $3 $4 /" | tee -a $R/nano.txt
  pack
done
TACHYON_LPT_DUE_SOON=$1 timeout 100 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 \
  --scheduling-policy lpt --out $R/timeline 2>&1 | f | grep "total_s\|Error" | cut -c1-1500
pack
