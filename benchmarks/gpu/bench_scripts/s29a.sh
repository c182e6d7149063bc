# Session 29 (stop 36), first call: the flat scheduling policy. mixed_check.py (graphed mixed steps with two prompt
# chunks and with a chunk short of its prompt's end, against the same padded step run eagerly), then
# `tachyon bench offline --workload nano256` with scheduling_policy fcfs / flat alternating (7B twice each, 0.6B
# once each), nvidia-smi at 100 ms beside. Packed into $OUT/s29a.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s29a.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s29a
mkdir -p $R/offline
pack() { tar czf $OUT/s29a.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
if [ -n "$KTESTS" ]; then  # the split prefill kernel's tests on the GPU (bf16 and fp32)
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py -k "$KTESTS" 2>&1 | tail -3 | tee $R/ktests.txt
fi
[ -n "$SKIP_CHECK" ] || timeout 150 python3 benchmarks/gpu/mixed_check.py --out $R --reps 3 ${CHECK_SHAPES:+--shapes $CHECK_SHAPES} 2>&1 | f > $R/mixed_check.txt
echo "mixed_check rc $?"; grep -o "start-up [0-9.]* s\|'key': [^]]*]\|'rel_err_padded_eager': [0-9.e-]*\|'ok': [A-Za-z]*" $R/mixed_check.txt | paste -sd' ' | fold -w 2000
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 100 \
  > $R/smi.csv 2>&1 &
SMI=$!
i=0
RUNS=${RUNS:-"qwen2.5-7b:fcfs qwen2.5-7b:flat qwen2.5-7b:fcfs qwen2.5-7b:flat qwen3-0.6b:fcfs qwen3-0.6b:flat"}
for run in $RUNS; do  # model:policy[:NAME=VALUE,... environment for that process, '-' in a VALUE for ':']
  IFS=: read -r m p vars <<< "$run"
  i=$((i + 1))
  echo "$i $m $p $vars start $(date +%H:%M:%S.%N)" >> $R/marks.txt
  env ${vars:+$(echo "${vars//-/:}" | tr , ' ')} timeout 150 $B bench offline --backend tachyon --model $m --dummy \
    --workload nano256 --repeats 2 --engine-arg scheduling_policy=$p --output $R/offline/${i}_${m}_$p.json 2>&1 \
    | f | grep "runs:\|Error\|error" | sed "s/^/$i $m $p $vars /" | tee -a $R/runs.txt
  pack
done
kill $SMI
pack
