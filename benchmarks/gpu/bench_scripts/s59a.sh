# Stop 59, on any card: (1) s58c.sh's FP8 tensor-core decode probe (~1-2 min); (2) Qwen2.5-7B nano256 with the e4m3
# (fp8) KV cache, engine alone, the stop-58 widening default against TACHYON_KV8_WIDEN=cvt (the old path), in turn
# twice (~5 min), nvidia-smi at 200 ms beside it. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s59a.sh
bash benchmarks/gpu/bench_scripts/s58c.sh
source benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
mkdir -p $OUT/kvnano
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active,temperature.gpu \
  --format=csv -lms 200 > $OUT/kvnano/smi.csv 2>&1 &
SMI=$!
for i in 1 2; do
  for mode in cvt default; do
    if [ $mode = cvt ]; then KNOB=TACHYON_KV8_WIDEN=cvt; else KNOB=TACHYON_UNUSED=1; fi
    echo "== $mode$i $(date +%T)" >> $OUT/kvnano/phases.txt
    env $KNOB timeout 120 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
      --warmup-max-tokens 32 --engine-arg kv_cache_dtype=fp8 --output $OUT/kvnano/nano256_kvfp8_$mode$i.json 2>&1 \
      | f | grep "^| tachyon \|Error\|error" | sed "s/^/7b nano256 kvfp8 $mode$i /" | tee -a $OUT/kvnano/rows.txt
  done
done
kill $SMI
