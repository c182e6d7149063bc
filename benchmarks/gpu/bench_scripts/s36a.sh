# For the next stop's first call (~6 minutes): does longest-first dispatch pay in the fused decode kernel, which the
# engine takes for split launches (the small buckets: 7B below 33 sequences, 0.6B below 17)? In the dedicated kernel
# the ordered grid cut a split 24-sequence launch by 4.5-11% (stop 42, decode_order_sweep.py). (1) the sweep's fused
# forms (batch / heads / lpt) at 2-32 sequences, graphs sized for 32,768 tokens; (2) 7B and 0.6B seed8 engine
# alone, TACHYON_DECODE_ORDER=lpt (orders every bucket) against the default (orders none of these), alternating.
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/offline /tmp/off
timeout 200 python3 benchmarks/gpu/decode_order_sweep.py --out $OUT --batches "" \
  --fused-batches "2/2,4/4,8/8,16/16,24/32,32/32" --ctx "200:1600,100:800" --max-seq-len 32768 2>&1 | f | tail -3
run() {  # tag, order ('' = the default), model
  TACHYON_DECODE_ORDER=$2 timeout 90 $B bench offline --backend tachyon --model $3 --dummy --workload seed8 \
    --repeats 3 --output /tmp/off/seed8_$1.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$1 /"
  cp /tmp/off/seed8_$1.json $OUT/offline/
}
run 7b_default "" qwen2.5-7b; run 7b_lpt lpt qwen2.5-7b; run 7b_default2 "" qwen2.5-7b; run 7b_lpt2 lpt qwen2.5-7b
run 06_default "" qwen3-0.6b; run 06_lpt lpt qwen3-0.6b; run 06_default2 "" qwen3-0.6b; run 06_lpt2 lpt qwen3-0.6b
