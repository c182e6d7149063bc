# Stop 41's second machine (~5 minutes): with the longest-first mixed dispatch now the default, (1) the logits-out
# tests (the fallback test fixed to run on the CPU), (2) mixed_check.py on 7B (now on an fcfs engine: flat's row budget
# left its running decodes half finished), (3) Qwen3-0.6B nano256 engine alone, batch / lpt alternating.
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/offline
timeout 60 python3 -m pytest -q tests/test_kernels_logits_out.py 2>&1 | tail -2
run() {  # tag, order
  TACHYON_MIXED_ORDER=$2 timeout 80 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload nano256 \
    --output $OUT/offline/nano256_06_$1.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$1 /"
}
run batch batch; run lpt lpt
timeout 120 python3 benchmarks/gpu/mixed_check.py --shapes qwen2.5-7b \
  --steps 200:40+48,144:88,250:300~70 --out $OUT/check_lpt 2>&1 | f | tail -8
run batch2 batch; run lpt2 lpt
