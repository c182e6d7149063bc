# Session 31 (stop 38), second call: one launch is the mixed steps' default, and the mixed graphs run their last
# layer on the sample rows only. 1. Qwen2.5-7B cold start-up (empty Triton cache: do the new kept-rows launches
# compile in the warm-up?). 2. mixed_check.py, both shapes (each graph replay equals its padded eager step).
# 3. mixed_cost.py on 7B, kept rows (default) against TACHYON_PRUNE_LAST_LAYER=0. 4. 7B nano256, alternating
# RUNS="policy:prune ..." (prune 1 = default, 0 = every row), nvidia-smi at 100 ms beside. Packed into $OUT/s31b.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s31b.sh (carry .whl)
# SKIP_STARTUP / SKIP_CHECK / SKIP_COST=1 leave parts out.
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s31b
mkdir -p $R/offline
pack() { tar czf $OUT/s31b.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
export TRITON_CACHE_DIR=/tmp/tc_b
if [ -z "$SKIP_STARTUP" ]; then
  timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R --tag cold > $R/startup.log 2>&1
  echo "startup rc $?"
  python3 - "$R/startup_qwen2.5-7b_cold.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in d.items() if k not in ("env", "detail", "engine_args")})
PY
  pack
fi
[ -n "$SKIP_CHECK" ] || { timeout 150 python3 benchmarks/gpu/mixed_check.py --out $R --reps 3 > $R/check.log 2>&1;
  echo "mixed_check rc $?"; grep -i "fail\|error\|rel" $R/check.log | tail -6; pack; }
M="python3 benchmarks/gpu/mixed_cost.py --out $R --shape qwen2.5-7b --reps 5 --steps ${STEPS:-200:40+48,144:88,128:128,130:300~70}"
if [ -z "$SKIP_COST" ]; then
  timeout 90 $M --tag kept > $R/kept.log 2>&1; grep "^kept\|Error" $R/kept.log
  TACHYON_PRUNE_LAST_LAYER=0 timeout 90 $M --tag allrows > $R/allrows.log 2>&1; grep "^allrows\|Error" $R/allrows.log
  pack
fi
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 100 \
  > $R/smi.csv 2>&1 &
SMI=$!
i=0
RUNS=${RUNS:-"flat:1 flat:0 fcfs:1 flat:1"}
for run in $RUNS; do
  IFS=: read -r p k <<< "$run"
  i=$((i + 1))
  echo "$i $p $k start $(date +%H:%M:%S.%N)" >> $R/marks.txt
  TACHYON_PRUNE_LAST_LAYER=$k timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy \
    --workload nano256 --repeats 2 --engine-arg scheduling_policy=$p --output $R/offline/${i}_${p}_prune$k.json 2>&1 \
    | f | grep "runs:\|Error\|error" | sed "s/^/$i $p prune$k /"
  pack
done
kill $SMI
pack
