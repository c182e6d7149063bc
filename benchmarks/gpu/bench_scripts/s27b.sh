# Session 27's acceptance calls, at one commit. Steps, in the order given (comma-separated):
#   startup   Qwen2.5-7B cold start-up (empty Triton cache; the machine's first process when given first)
#   bs1_06    Qwen3-0.6B bs1 beside transformers (--repeats 5)
#   nano_7    Qwen2.5-7B nano256 beside transformers (static batches of 64; warm-up capped at 32 output tokens),
#             nvidia-smi at 100 ms beside it
#   hf_7      Qwen2.5-7B bs1 and seed8 beside transformers (--repeats 3)
#   tests     the GPU kernel tests at real sizes (tests/test_kernels*.py, 8 workers)
# Each backend runs in its own process. Packed into $OUT/s27b.tgz after every step.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s27b.sh STEPS (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/s27b
mkdir -p $R/startup $R/offline
pack() { tar czf $OUT/s27b.tgz -C $R .; }
rows() { grep "runs:\|warm-up\|^| \(hf\|tachyon\) \|Error\|error\|FAILED"; }
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader | tee -a $R/gpu.txt
for s in ${1//,/ }; do
  echo "== $s $(date +%T)" | tee -a $R/phases.txt
  case $s in
    startup)
      TRITON_CACHE_DIR=/tmp/tc_s27b timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup \
        2>&1 | grep "^{\|Error" | cut -c1-400 ;;
    bs1_06)
      timeout 200 $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 5 \
        --output $R/offline/bs1_qwen3-0.6b.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/0.6b bs1 /" ;;
    nano_7)
      nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
        --format=csv -lms 100 > $R/smi_nano_7b.csv 2>&1 &
      SMI=$!
      timeout ${NANO_TIMEOUT:-450} $B bench offline --backend hf,tachyon --model qwen2.5-7b --dummy --workload nano256 \
        --hf-batch-size 64 --warmup-max-tokens 32 --output $R/offline/nano256_qwen2.5-7b.json --report-dir $R/offline \
        2>&1 | f | rows | sed "s/^/7b nano256 /"
      kill $SMI ;;
    hf_7)
      for w in bs1 seed8; do
        timeout 200 $B bench offline --backend hf,tachyon --model qwen2.5-7b --dummy --workload $w --repeats 3 \
          --output $R/offline/${w}_qwen2.5-7b.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/7b $w /"
        pack
      done ;;
    tests)
      timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -3 | tee $R/gpu_tests.txt ;;
  esac
  pack
done
echo "== done $(date +%T)" | tee -a $R/phases.txt
pack
