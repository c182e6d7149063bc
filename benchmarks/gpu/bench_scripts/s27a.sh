# Session 27, call 1 (~8 min):
#   1. startup26.sh with PAIRS=1: Qwen2.5-7B cold start-up, the machine's first process, then eager-first / default /
#      TACHYON_PREBUILD_LAUNCHERS=1, each with an empty Triton cache (-> $OUT/startup26.tgz)
#   2. Qwen3-0.6B bs1 engine alone, default / TACHYON_PREBUILD_LAUNCHERS=1 alternating, twice (--repeats 3): does the
#      launcher prebuild move bs1's start-up layout into the slow mode?
#   3. Qwen3-0.6B nano256 beside transformers (static batches of 64), nvidia-smi at 100 ms beside it
# Results: $OUT/s27a.tgz (2, 3) and $OUT/startup26.tgz (1).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s27a.sh (carry .whl)
PAIRS=1 bash benchmarks/gpu/bench_scripts/startup26.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/s27a
mkdir -p $R/ab $R/offline
pack() { tar czf $OUT/s27a.tgz -C $R .; }
echo "== ab $(date +%T)" | tee -a $R/phases.txt
for v in default:- prebuild:TACHYON_PREBUILD_LAUNCHERS=1 default2:- prebuild2:TACHYON_PREBUILD_LAUNCHERS=1; do
  e=${v#*:}; e=${e/#-/}
  env $e timeout 100 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 3 \
    --output $R/ab/bs1_${v%%:*}.json 2>&1 | f | grep "runs:\|Error" | sed "s/^/ab ${v%%:*} /" | tee -a $R/ab/runs.txt
  pack
done
echo "== nano 0.6b $(date +%T)" | tee -a $R/phases.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout ${NANO_TIMEOUT:-330} $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload nano256 \
  --hf-batch-size 64 --output $R/offline/nano256_qwen3-0.6b.json --report-dir $R/offline 2>&1 | f \
  | grep "runs:\|warm-up\|^| \(hf\|tachyon\) \|Error\|error\|FAILED" | sed "s/^/0.6b nano256 /"
kill $SMI
echo "== done $(date +%T)" | tee -a $R/phases.txt
pack
