# Session 28's first GPU call (prepared at stop 34, which had no device time left): what bounds prefill attention,
# then this tree's GPU kernel tests and a cold Qwen2.5-7B start-up.
#   variants  benchmarks/gpu/prefill_attn_variants.py: the engine's prefill kernel under tile candidates against
#             the experimental forms (packed GQA rows or one head per program; paged or contiguous K/V)
#   tests     the GPU kernel tests at real sizes (tests/test_kernels*.py, 8 workers)
#   startup   Qwen2.5-7B cold start-up (empty Triton cache; give it first to get the machine's first process)
# Packed into $OUT/s28a.tgz after every step.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s28a.sh STEPS (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s28a
mkdir -p $R/startup $R/variants
pack() { tar czf $OUT/s28a.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader | tee -a $R/gpu.txt
for s in ${1//,/ }; do
  echo "== $s $(date +%T)" | tee -a $R/phases.txt
  case $s in
    variants)
      timeout ${VARIANTS_TIMEOUT:-420} python3 benchmarks/gpu/prefill_attn_variants.py --out $R/variants 2>&1 \
        | grep -v -i warn | tee $R/variants/log.txt | cut -c1-600 ;;
    tests)
      timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -3 | tee $R/gpu_tests.txt ;;
    startup)
      TRITON_CACHE_DIR=/tmp/tc_s28a timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup \
        2>&1 | grep "^{\|Error" | cut -c1-400 ;;
  esac
  pack
done
echo "== done $(date +%T)" | tee -a $R/phases.txt
pack
