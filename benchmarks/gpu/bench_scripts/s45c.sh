# Flat's R from the prompts' deadlines (~6 minutes on a cold machine). Under flat every step was filled to R >= 300
# rows, so the prompts were all in by step ~926 and the run ended in ~105 decode-only steps of 112 -> 1 rows, each
# paying a whole weight read for ~60 rows (T = 1,032 steps). TACHYON_FLAT_DEADLINE=1 takes R from the deadlines
# instead: each prompt admitted late enough to end with the longest request and no later, R at least
# TACHYON_FLAT_ROWS; in the CPU simulation (benchmarks/flat_schedule.py) the run then takes 1,023 steps and its
# decode-only tail averages ~200 rows. 7B nano256, engine alone, alternating:
#   base   the committed default (R = max(300, work / horizon))
#   dl128  deadline R, at least 128 rows
#   dl256  deadline R, at least 256 rows
# then Qwen3-0.6B nano256 once each, base and dl128.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s45c.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s45c
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 200 > $R/smi.csv &
SMI=$!
run() {  # tag, env...  (MODEL: qwen2.5-7b unless set)
  local tag=$1; shift
  env "$@" timeout 100 $B bench offline --backend tachyon --model ${MODEL:-qwen2.5-7b} --dummy --workload nano256 \
    --output $R/nano256_$tag.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$tag /"
}
for i in 1 2; do
  run base$i
  run dl128_$i TACHYON_FLAT_DEADLINE=1 TACHYON_FLAT_ROWS=128
  run dl256_$i TACHYON_FLAT_DEADLINE=1 TACHYON_FLAT_ROWS=256
  tar czf $OUT/s45c.tgz -C $R .
done
MODEL=qwen3-0.6b run 06base
MODEL=qwen3-0.6b run 06dl128 TACHYON_FLAT_DEADLINE=1 TACHYON_FLAT_ROWS=128
kill $SMI
tar czf $OUT/s45c.tgz -C $R .
