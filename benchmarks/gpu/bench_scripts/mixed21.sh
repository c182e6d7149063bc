# Session 21: graphed mixed steps (engine/mixed_graph.py). mixed_check.py (graph replay against the eager step,
# timings, start-up), then `tachyon bench offline --backend tachyon --workload nano256 --repeats 2` per
# (shape, policy, TACHYON_LPT_DUE_SOON, mixed_graph_max_tokens), one process each. Packed into $OUT/mixed21.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/mixed21.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/mixed21
mkdir -p $R/offline
pack() { tar czf $OUT/mixed21.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 200 python3 benchmarks/gpu/mixed_check.py --out $R 2>&1 | f | tee $R/mixed_check.txt | grep -v "^  {" | head -5
grep -o "'key'.*'ok': [A-Za-z]*" $R/mixed_check.txt | sed "s/'argmax_agree'.*'ok'/ok/"
pack
i=0
for run in "qwen2.5-7b fcfs 0.9 1024" "qwen2.5-7b lpt 1.0 1024" "qwen2.5-7b lpt 0.9 1024" "qwen2.5-7b lpt 1.0 0" \
           "qwen3-0.6b fcfs 0.9 1024" "qwen3-0.6b lpt 1.0 1024"; do
  set -- $run
  i=$((i + 1))
  TACHYON_LPT_DUE_SOON=$3 timeout 100 $B bench offline --backend tachyon --model $1 --dummy --workload nano256 \
    --repeats 2 --engine-arg scheduling_policy=$2 --engine-arg mixed_graph_max_tokens=$4 \
    --output $R/offline/${i}_$1_$2_$3_$4.json 2>&1 | f \
    | grep "runs:\|Error\|error\|ready in" | sed "s/^/$i $1 $2 $3 $4 /" | tee -a $R/nano.txt
  pack
done
