# Stop 59, on any card: (1) the kv-fp8 kernel tests at real sizes with the default now cvt (every mode and auto
# included); (2) whether TACHYON_KV8_WIDEN=auto (cvt:asm from 2.5 programs a SM) pays where decode attention
# dominates: Qwen2.5-7B, e4m3 cache, 128 x 2,048 prompt tokens + 768 outputs, engine alone, default (cvt) against
# auto, in turn twice, nvidia-smi at 200 ms beside it. ~4 min. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s59b.sh
source benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p $OUT/long
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_kv_fp8.py 2>&1 | tail -3 | tee $OUT/tests.txt
python3 benchmarks/gpu/long_decode_workload.py /tmp/long128.json --requests 128 --prompt 2048 --outputs 768
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active,temperature.gpu \
  --format=csv -lms 200 > $OUT/long/smi.csv 2>&1 &
SMI=$!
for i in 1 2; do
  for mode in default auto; do
    if [ $mode = auto ]; then KNOB=TACHYON_KV8_WIDEN=auto; else KNOB=TACHYON_UNUSED=1; fi
    echo "== $mode$i $(date +%T.%N)" >> $OUT/long/phases.txt
    env $KNOB timeout 150 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload /tmp/long128.json \
      --warmup-max-tokens 32 --engine-arg kv_cache_dtype=fp8 --output $OUT/long/long128_kvfp8_$mode$i.json 2>&1 \
      | f | grep "^| tachyon \|Error\|error" | sed "s/^/7b long128 kvfp8 $mode$i /" | tee -a $OUT/long/rows.txt
  done
done
kill $SMI
rm -f $OUT/long/*.requests.jsonl
