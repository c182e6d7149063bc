# Session 32 (stop 39), first call: what does a row cost a 7B step's GEMMs around the flat schedule's fill (288
# rows)? 1. gemm_rows.py: the 28-layer GEMM chain at 192-512 rows, at the power cap (ms, us and mJ per row, the
# kernels cuBLAS picks). 2. mixed_cost.py on 7B, kept rows (default) against TACHYON_PRUNE_LAST_LAYER=0 (stop 38's
# cut step). 3. 7B nano256 under flat, alternating RUNS="policy:flat_rows ..." (TACHYON_FLAT_ROWS), nvidia-smi at
# 100 ms beside. Packed into $OUT/s32a.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s32a.sh (carry .whl)
# SKIP_GEMM / SKIP_COST=1 leave parts out.
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s32a
mkdir -p $R/offline
pack() { tar czf $OUT/s32a.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
[ -n "$SKIP_GEMM" ] || { timeout 120 python3 benchmarks/gpu/gemm_rows.py --out $R/gemm_rows.json > $R/gemm.log 2>&1;
  echo "gemm_rows rc $?"; sed -n '/^rows |/,$p' $R/gemm.log; pack; }
M="python3 benchmarks/gpu/mixed_cost.py --out $R --shape qwen2.5-7b --reps 5 --steps ${STEPS:-200:40+48,144:88,128:128}"
if [ -z "$SKIP_COST" ]; then
  timeout 90 $M --tag kept > $R/kept.log 2>&1; grep "^kept\|Error" $R/kept.log
  TACHYON_PRUNE_LAST_LAYER=0 timeout 90 $M --tag allrows > $R/allrows.log 2>&1; grep "^allrows\|Error" $R/allrows.log
  pack
fi
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 100 \
  > $R/smi.csv 2>&1 &
SMI=$!
i=0
RUNS=${RUNS:-"flat:288 flat:256 flat:384 flat:320 flat:288"}
for run in $RUNS; do
  IFS=: read -r p k <<< "$run"
  i=$((i + 1))
  echo "$i $p $k start $(date +%H:%M:%S.%N)" >> $R/marks.txt
  TACHYON_FLAT_ROWS=$k timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy \
    --workload nano256 --repeats 2 --engine-arg scheduling_policy=$p --output $R/offline/${i}_${p}_rows$k.json 2>&1 \
    | f | grep "runs:\|Error\|error" | sed "s/^/$i $p rows$k /"
  pack
done
kill $SMI
pack
