# Session 16, first call: does the data itself move the power-capped runs?
# 1. data_power.py: bf16 GEMMs (8192^3, the 7B prefill gate_up, the B=256 decode gate_up and down) with our dummy
#    init's data (W ~ N(0, 0.02), X ~ N(0, 1)), vLLM's (everything U(-1e-3, 1e-3)) and zeros: TFLOP/s, board power,
#    SM clock, back to back for 3 s each.
# 2. Qwen2.5-7B nano256 through the engine (engine_smoke.py) with TACHYON_DUMMY_INIT=normal (ours) and =uniform
#    (vLLM's dummy loader), alternating processes, nvidia-smi beside.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/power16.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/power16
mkdir -p $R
pack() { tar czf $OUT/power16.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 150 python3 benchmarks/gpu/data_power.py --out $R/data_power.json --seconds ${SECS:-3} 2>&1 | f | tee $R/data_power.txt
pack
for p in 1 2; do
  for init in normal uniform; do
    echo "== $init p$p $(date +%T)" >> $R/engine.txt
    TACHYON_DUMMY_INIT=$init timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads nano256 \
      --out $R --tag _${init}_p$p 2>&1 | f | grep -E "startup|nano256" | tail -2 | tee -a $R/engine.txt
    pack
  done
done
kill $SMI
pack
