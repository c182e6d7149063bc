# Stop 59, on any card: TACHYON_KV8_WIDEN=auto now widens by cvt:asm only in decode-only unsplit launches of >= 2.5
# programs a SM (the mixed launch keeps cvt). Qwen2.5-7B, e4m3 cache, engine alone, default (cvt) against auto:
# nano256 in turn twice, then 128 x 2,048 + 768 (s59b.sh's decode-bound run) once each; the FP8-probe test first.
# nvidia-smi at 200 ms beside it. ~5 min. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s59c.sh
source benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p $OUT/ab
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_kv_fp8.py -k "probe or knob" 2>&1 | tail -3 \
  | tee $OUT/tests.txt
python3 benchmarks/gpu/long_decode_workload.py /tmp/long128.json --requests 128 --prompt 2048 --outputs 768
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active,temperature.gpu \
  --format=csv,noheader -lms 200 > $OUT/ab/smi.csv 2>&1 &
SMI=$!
one() {  # workload-name workload mode round
  local knob=TACHYON_UNUSED=1
  [ $3 = auto ] && knob=TACHYON_KV8_WIDEN=auto
  echo "== $1 $3$4 $(date +%T.%N)" >> $OUT/ab/phases.txt
  env $knob timeout 150 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload $2 \
    --warmup-max-tokens 32 --engine-arg kv_cache_dtype=fp8 --output $OUT/ab/$1_kvfp8_$3$4.json 2>&1 \
    | f | grep "^| tachyon \|Error\|error" | sed "s/^/7b $1 kvfp8 $3$4 /" | tee -a $OUT/ab/rows.txt
}
for i in 1 2; do one nano256 nano256 default $i; one nano256 nano256 auto $i; done
one long128 /tmp/long128.json default 1; one long128 /tmp/long128.json auto 1
echo "== end $(date +%T.%N)" >> $OUT/ab/phases.txt
kill $SMI
rm -f $OUT/ab/*.requests.jsonl
