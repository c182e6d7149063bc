# Session 30 (stop 37), second call: the one-launch mixed-step attention (kernels/attention_mixed.py). Its GPU kernel
# tests (bf16 and fp32, beside the prefill ones), mixed_cost.py on Qwen2.5-7B with one launch (the default) and with
# two (TACHYON_MIXED_ATTN=two, the old form), each with a kernel profile, then 7B nano256 under the restored flat
# policy with one and two launches and under lpt, nvidia-smi at 100 ms beside. Packed into $OUT/s30b.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s30b.sh (carry .whl)
# SKIP_KTESTS=1 / SKIP_COST=1 leave out the tests / mixed_cost.py; RUNS="policy:one|two ..." sets the nano256 runs.
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s30b
mkdir -p $R/offline
pack() { tar czf $OUT/s30b.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
[ -n "$SKIP_KTESTS" ] || timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_kernels_mixed.py tests/test_kernels.py \
  -k "mixed or prefill" > $R/ktests.txt 2>&1; tail -2 $R/ktests.txt
M="python3 benchmarks/gpu/mixed_cost.py --out $R --shape qwen2.5-7b --profile --steps ${STEPS:-200:40+48,144:88,128:128,130:300~70}"
[ -n "$SKIP_COST" ] || timeout 120 $M --tag one > $R/one.log 2>&1; grep "^one\|Error" $R/one.log; pack
[ -n "$SKIP_COST" ] || TACHYON_MIXED_ATTN=two timeout 120 $M --tag two > $R/two.log 2>&1; grep "^two\|Error" $R/two.log; pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 100 \
  > $R/smi.csv 2>&1 &
SMI=$!
i=0
RUNS=${RUNS:-"flat:one lpt:one flat:two"}
for run in $RUNS; do
  IFS=: read -r p a <<< "$run"
  i=$((i + 1))
  echo "$i $p $a start $(date +%H:%M:%S.%N)" >> $R/marks.txt
  TACHYON_MIXED_ATTN=$a timeout 130 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
    --repeats 2 --engine-arg scheduling_policy=$p --output $R/offline/${i}_${p}_${a}.json 2>&1 \
    | f | grep "runs:\|Error\|error" | sed "s/^/$i $p $a /" | tee -a $R/runs.txt
  pack
done
kill $SMI
pack
