# Session 22 (stop 29): the acceptance figures at one commit, in the acceptance's form (`tachyon bench offline
# --backend hf,tachyon`, transformers in the same process), plus the HEAD checks the StepGraphs refactor still
# lacked on the GPU. Phases, in the order given (comma-separated):
#   startup   engine start-up with an empty Triton cache (a fresh TRITON_CACHE_DIR)
#   mixed     mixed_check.py: the mixed graphs' replay against the same padded step run eagerly
#   hf        bs1 (--repeats $BS1_REPEATS, default 3) and seed8 (--repeats 3) beside transformers
#   nano      nano256 beside transformers (static batches of 64), nvidia-smi at 100 ms beside it
#   ab        nano256 engine runs, max_num_batched_tokens 8,192 (the offline default) / 16,384, alternating
#   tests     the GPU kernel tests at real sizes, and engine_smoke.py --parity
# Packed into $OUT/accept22_<shape>.tgz after every phase.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/accept22.sh SHAPE PHASES
#   SHAPE: qwen3-0.6b | qwen2.5-7b (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
SHAPE=$1
R=/tmp/accept22_$SHAPE
mkdir -p $R/offline $R/startup $R/ab $R/smoke
pack() { tar czf $OUT/accept22_$SHAPE.tgz -C $R .; }
rows() { grep "runs:\|warm-up\|^| \(hf\|tachyon\) \|Error\|error"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
for phase in ${2//,/ }; do
  echo "== $phase $(date +%T)"
  case $phase in
    startup)
      TRITON_CACHE_DIR=/tmp/triton_cold_$SHAPE timeout 120 python3 benchmarks/gpu/startup.py --shape $SHAPE \
        --out $R/startup 2>&1 | f | grep "^{\|Error" | cut -c1-600 ;;
    mixed)
      timeout 150 python3 benchmarks/gpu/mixed_check.py --shapes $SHAPE --steps 144:560,8:200 --out $R 2>&1 | f \
        | tee $R/mixed_check.txt | grep -o "start-up [0-9.]* s\|'key'.*'rel_err_eager'\|'ok': [A-Za-z]*" ;;
    hf)
      for w in "bs1 ${BS1_REPEATS:-3}" "seed8 3"; do
        set -- $w
        timeout 240 $B bench offline --backend hf,tachyon --model $SHAPE --dummy --workload $1 --repeats $2 \
          --output $R/offline/$1_$SHAPE.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/$SHAPE $1 /"
        pack
      done ;;
    nano)
      nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
        --format=csv -lms 100 > $R/smi.csv 2>&1 &
      SMI=$!
      timeout 420 $B bench offline --backend hf,tachyon --model $SHAPE --dummy --workload nano256 --hf-batch-size 64 \
        --output $R/offline/nano256_$SHAPE.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/$SHAPE nano256 /"
      kill $SMI ;;
    ab)
      i=0
      for budget in 8192 16384 8192 16384; do
        i=$((i + 1))
        timeout 120 $B bench offline --backend tachyon --model $SHAPE --dummy --workload nano256 \
          --engine-arg max_num_batched_tokens=$budget --output $R/ab/${i}_$budget.json 2>&1 | f | grep "runs:\|Error" \
          | sed "s/^/$i $SHAPE $budget /" | tee -a $R/ab/budget.txt
        pack
      done ;;
    tests)
      timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels*.py 2>&1 | tail -3 \
        | tee $R/gpu_tests.txt
      timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes $SHAPE --workloads bs1 --parity --out $R/smoke 2>&1 \
        | f | tail -6 | cut -c1-400 ;;
  esac
  pack
done
echo "== done $(date +%T)"
