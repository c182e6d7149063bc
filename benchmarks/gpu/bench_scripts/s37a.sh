# Stop 43's first call (~8 minutes): (1) Qwen2.5-7B cold start-up at this tree (acceptance.sh's startup step, the
# machine's first process); (2) s36a's question, whether longest-first dispatch pays in the fused decode kernel that
# the small buckets take (7B below 33 sequences, 0.6B below 17): the sweep's fused forms (batch / heads / lpt) at
# 2-32 sequences, then seed8 engine alone under TACHYON_DECODE_ORDER=lpt (orders every bucket) against the default
# (orders none of these), alternating. Everything comes back in $OUT/s37a.tgz (the call returns at most 8 files).
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s37a.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s37a
mkdir -p $R/offline $R/startup
pack() { tar czf $OUT/s37a.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
TRITON_CACHE_DIR=/tmp/tc_startup timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup \
  2>&1 | grep "^{\|Error" | cut -c1-400
pack
timeout 200 python3 benchmarks/gpu/decode_order_sweep.py --out $R --batches "" \
  --fused-batches "2/2,4/4,8/8,16/16,24/32,32/32" --ctx "200:1600,100:800" --max-seq-len 32768 2>&1 | f | tail -3
pack
run() {  # tag, order ('' = the default), model
  TACHYON_DECODE_ORDER=$2 timeout 90 $B bench offline --backend tachyon --model $3 --dummy --workload seed8 \
    --repeats 3 --output $R/offline/seed8_$1.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$1 /"
  pack
}
run 7b_default "" qwen2.5-7b; run 7b_lpt lpt qwen2.5-7b; run 7b_default2 "" qwen2.5-7b; run 7b_lpt2 lpt qwen2.5-7b
run 06_default "" qwen3-0.6b; run 06_lpt lpt qwen3-0.6b
