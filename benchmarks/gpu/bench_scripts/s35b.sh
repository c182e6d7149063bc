# Stop 42's second call (~6 minutes): where does the decode-only longest-first dispatch lose? s35a found it 14-16%
# faster per layer on 146- and 200-decode 7B steps but 11% slower on 96, and 7B nano256 +1.4% under fcfs, level under
# flat. (1) decode_order_sweep.py: batch / heads-fastest-in-batch-order / longest first over batch and context spread,
# 7B and 0.6B; (2) Qwen3-0.6B nano256 under fcfs, batch / lpt alternating.
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/offline /tmp/off
timeout 240 python3 benchmarks/gpu/decode_order_sweep.py --out $OUT 2>&1 | f | tail -3
run() {  # tag, order
  TACHYON_DECODE_ORDER=$2 timeout 80 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload nano256 \
    --engine-arg scheduling_policy=fcfs --output /tmp/off/nano256_06_$1.json 2>&1 | f | grep "^| tachyon\|Error" \
    | sed "s/^/$1 /"
  cp /tmp/off/nano256_06_$1.json $OUT/offline/
}
run fcfs_batch batch; run fcfs_lpt lpt; run fcfs_batch2 batch; run fcfs_lpt2 lpt
