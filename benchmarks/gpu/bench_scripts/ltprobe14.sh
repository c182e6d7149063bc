# Session 14, second call: (1) the GPU kernel tests at the submitted engine (the first call's summary line was lost
# to its filter); (2) stop 19's open question, Qwen3-0.6B bs1 in the acceptance configuration with cuBLASLt used
# once before the engine is built (lt_touch.py, LT_TOUCH=1) against not at all, alternating, three rounds.
# Packed into $OUT/ltprobe14.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/ltprobe14.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/ltprobe14
mkdir -p $R
pack() { tar czf $OUT/ltprobe14.tgz -C $R .; }
for round in 1 2 3; do
  for touch in 1 0; do
    echo "$(date +%T) round $round LT_TOUCH=$touch" >> $R/order.txt
    LT_TOUCH=$touch timeout 80 python3 benchmarks/gpu/lt_touch.py bench offline --backend tachyon --model qwen3-0.6b \
      --dummy --workload bs1 --output $R/bs1_touch${touch}_r$round.json 2>&1 | tee $R/log_touch${touch}_r$round.txt | f | grep "^| tachyon " | head -1 \
      | sed "s/^/touch=$touch /" | tee -a $R/order.txt
    pack
  done
done
timeout 330 python3 -m pytest -q -p no:cacheprovider tests/test_kernels*.py tests/engine/test_kept_rows.py \
  > $R/gpu_tests.txt 2>&1
tail -5 $R/gpu_tests.txt
pack
