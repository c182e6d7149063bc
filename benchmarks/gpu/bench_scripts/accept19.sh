# Session 19: nano256 beside transformers in one run (the acceptance's form; earlier stops compared nano256 with
# BENCHMARKS.md's transformers figure): `tachyon bench offline --backend hf,tachyon --workload nano256` for one
# shape, transformers in static batches of 64 (BENCHMARKS.md's baseline), nvidia-smi at 100 ms beside.
# Packed into $OUT/accept19_<shape>.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/accept19.sh SHAPE TIMEOUT_S
#   SHAPE: qwen3-0.6b | qwen2.5-7b (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
SHAPE=$1
R=/tmp/accept19_$SHAPE
mkdir -p $R/offline
pack() { tar czf $OUT/accept19_$SHAPE.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout $2 $B bench offline --backend hf,tachyon --model $SHAPE --dummy --workload nano256 --hf-batch-size 64 \
  --output $R/offline/nano256_$SHAPE.json --report-dir $R/offline 2>&1 | f \
  | grep "runs:\|warm-up\|^| \(hf\|tachyon\) \|Error\|error" | sed "s/^/$SHAPE nano256 /"
kill $SMI
pack
