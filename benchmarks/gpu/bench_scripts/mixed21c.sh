# Session 21, third call: 7B start-up (cold) and mixed_check with the compile pass over compile_keys(); arrivals_probe
# (nano256 requests arriving while others decode, 2,048-token steps) with mixed graphs on / off per shape; nano256
# fcfs (the acceptance configuration) with mixed graphs off / on. One process each. Packed into $OUT/mixed21c.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/mixed21c.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/mixed21c
mkdir -p $R/offline $R/arrivals
pack() { tar czf $OUT/mixed21c.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 120 python3 benchmarks/gpu/mixed_check.py --shapes qwen2.5-7b --steps 144:560,8:200 --out $R 2>&1 | f \
  | tee $R/mixed_check.txt | grep -v "^  {" | head -3
grep -o "'key'.*'eager_ms': [0-9.]*" $R/mixed_check.txt
pack
for run in "qwen2.5-7b 4 1024" "qwen2.5-7b 4 0" "qwen3-0.6b 8 0" "qwen3-0.6b 8 1024"; do
  set -- $run
  timeout 90 python3 benchmarks/gpu/arrivals_probe.py --shape $1 --rate $2 --num 64 \
    --engine-arg mixed_graph_max_tokens=$3 --tag mixed$3 --out $R/arrivals 2>&1 | f | grep "^{\|Error" | cut -c1-900
  pack
done
i=0
for m in 0 1024; do
  i=$((i + 1))
  timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 --repeats 2 \
    --engine-arg mixed_graph_max_tokens=$m --output $R/offline/${i}_fcfs_$m.json 2>&1 | f \
    | grep "runs:\|Error\|error" | sed "s/^/7b fcfs mixed $m /" | tee -a $R/nano.txt
  pack
done
