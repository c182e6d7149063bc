# Session 13's closing H200 call at the submitted engine: (1) the acceptance workloads beside transformers in one
# run each (tachyon bench offline --backend hf,tachyon: 7B bs1, 0.6B bs1, 7B seed8); (2) every standard workload on
# each shape (engine_smoke.py, one process per shape; greedy parity, four prompts together, on 0.6B); nvidia-smi
# beside (2). Packed into $OUT/final13.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final13.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/final13
mkdir -p $R/offline $R/smoke
pack() { tar czf $OUT/final13.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for run in "qwen2.5-7b bs1 120" "qwen3-0.6b bs1 70" "qwen2.5-7b seed8 120"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output $R/offline/$2_$1.json \
    --report-dir $R/offline 2>&1 | f | grep "^| \(hf\|tachyon\) " | head -2
  pack
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 110 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $R/smoke 2>&1 | f | tail -3
pack
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $R/smoke 2>&1 | f | tail -4
kill $SMI
pack
