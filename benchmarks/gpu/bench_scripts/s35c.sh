# Stop 42's third call (~4 minutes): the decode graphs' default order (longest first only for buckets of >= 3.5
# programs per SM, attention_config.decode_graph_order) against batch order, nano256 engine alone under fcfs (every
# decode step a decode graph), alternating: Qwen2.5-7B then Qwen3-0.6B.
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/offline /tmp/off
run() {  # tag, order ('' = the default), model, timeout
  TACHYON_DECODE_ORDER=$2 timeout $4 $B bench offline --backend tachyon --model $3 --dummy --workload nano256 \
    --engine-arg scheduling_policy=fcfs --output /tmp/off/nano256_$1.json 2>&1 | f | grep "^| tachyon\|Error" \
    | sed "s/^/$1 /"
  cp /tmp/off/nano256_$1.json $OUT/offline/
}
run 7b_auto "" qwen2.5-7b 90; run 7b_batch batch qwen2.5-7b 90; run 7b_auto2 "" qwen2.5-7b 90
run 7b_batch2 batch qwen2.5-7b 90
run 06_auto "" qwen3-0.6b 60; run 06_batch batch qwen3-0.6b 60; run 06_auto2 "" qwen3-0.6b 60
run 06_batch2 batch qwen3-0.6b 60
