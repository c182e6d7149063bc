# #3's acceptance figures at one commit, each beside transformers in one `bench offline` run (every backend in its own
# process). Steps, in the order given (comma-separated; each packs $OUT/acceptance.tgz when it ends):
#   startup   Qwen2.5-7B cold start-up (empty Triton cache; the machine's first process when given first)
#   bs1_06    Qwen3-0.6B bs1 (--repeats 5)
#   nano_06   Qwen3-0.6B nano256 (transformers in static batches of 64, warm-up capped at 32 output tokens)
#   nano_7    Qwen2.5-7B nano256 (as nano_06), nvidia-smi at 100 ms beside it (clock, power, throttle reasons, GPU °C)
#   hf_7      Qwen2.5-7B bs1 and seed8 (--repeats 3)
#   tests     the GPU kernel tests at real sizes (tests/test_kernels*.py, 8 workers)
#   late      late_compile_check.py on Qwen2.5-7B and Qwen3-0.6B: no request kind may compile Triton after start-up
# ENGINE_ARGS="k=v ..." passes engine arguments to Tachyon in every step (e.g. scheduling_policy=flat), recorded in
# each JSON's engine_args. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> [ENGINE_ARGS=...] bash benchmarks/gpu/bench_scripts/acceptance.sh startup,bs1_06,...
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/acceptance
mkdir -p $R/startup $R/offline $R/late
pack() { tar czf $OUT/acceptance.tgz -C $R .; }
rows() { grep "runs:\|warm-up\|^| \(hf\|tachyon\) \|Error\|error\|FAILED"; }
EA=""
for kv in $ENGINE_ARGS; do EA="$EA --engine-arg $kv"; done
nano() {  # shape, timeout
  timeout $2 $B bench offline --backend hf,tachyon --model $1 --dummy --workload nano256 $EA --hf-batch-size 64 \
    --warmup-max-tokens 32 --output $R/offline/nano256_$1.json --report-dir $R/offline 2>&1 | f | rows \
    | sed "s/^/$1 nano256 /"
}
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee -a $R/gpu.txt
for s in ${1//,/ }; do
  echo "== $s $(date +%T)" | tee -a $R/phases.txt
  case $s in
    startup)
      TRITON_CACHE_DIR=/tmp/tc_acceptance timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b \
        --out $R/startup $EA 2>&1 | grep "^{\|Error" | cut -c1-400 ;;
    bs1_06)
      timeout 200 $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 5 $EA \
        --output $R/offline/bs1_qwen3-0.6b.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/0.6b bs1 /" ;;
    nano_06)
      nano qwen3-0.6b ${NANO_TIMEOUT:-300} ;;
    nano_7)
      nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active,temperature.gpu \
        --format=csv -lms 100 > $R/smi_nano_7b.csv 2>&1 &
      SMI=$!
      nano qwen2.5-7b ${NANO_TIMEOUT:-450}
      kill $SMI ;;
    hf_7)
      for w in bs1 seed8; do
        timeout 200 $B bench offline --backend hf,tachyon --model qwen2.5-7b --dummy --workload $w --repeats 3 $EA \
          --output $R/offline/${w}_qwen2.5-7b.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/7b $w /"
        pack
      done ;;
    tests)
      timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -3 | tee $R/gpu_tests.txt ;;
    late)
      for m in qwen2.5-7b qwen3-0.6b; do
        timeout 150 python3 benchmarks/gpu/late_compile_check.py --shape $m $EA --out $R/late > $R/late/$m.log 2>&1
        echo "$m late-compile check rc $? $(tail -1 $R/late/$m.log)"
      done ;;
    *)
      echo "unknown step $s" ;;
  esac
  pack
done
echo "== done $(date +%T)" | tee -a $R/phases.txt
pack
