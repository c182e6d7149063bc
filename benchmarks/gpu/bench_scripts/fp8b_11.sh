# Session 11, second FP8 call: (1) the FP8 GPU kernel tests (row quantizer bit-exact after the signed-zero fix,
# cuBLASLt linear, batch-1 FP8 GEMV), (2) Qwen2.5-7B nano256 alternating bf16 / FP8 (fast accumulation on) /
# bf16 / FP8 (fast) / FP8 (exact accumulation), one process each, nvidia-smi sampling power and clocks,
# (3) Qwen2.5-7B bs1 + seed8 FP8 (batch-1 FP8 GEMV now tuned in), (4) Qwen3-0.6B every workload FP8.
# Results packed into $OUT/fp8b_11.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/fp8b_11.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/fp8b_11
mkdir -p $R/smoke
pack() { tar czf $OUT/fp8b_11.tgz -C $R .; }
timeout 150 python3 -m pytest -q tests/test_kernels_fp8.py 2>&1 | grep -E "FAILED|passed|failed" | tee $R/gpu_tests.txt
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active --format=csv \
  -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
i=0
for v in bf16 fp8fast bf16 fp8fast fp8exact; do
  i=$((i + 1))
  case $v in
    bf16) Q="" ; FA=0 ;;
    fp8fast) Q="--quantization fp8" ; FA=1 ;;
    fp8exact) Q="--quantization fp8" ; FA=0 ;;
  esac
  date +%T.%N | tee -a $R/order.txt
  TACHYON_FP8_FAST_ACCUM=$FA timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b \
    --workloads nano256 $Q --tag _${v}_$i --out $R/smoke 2>&1 | f | tail -1 | sed "s/^/$v /" | tee -a $R/order.txt
  pack
done
kill $SMI
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 --quantization fp8 \
  --tag _fp8_small --out $R/smoke 2>&1 | f | tail -3
pack
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --quantization fp8 --tag _fp8 --out $R/smoke \
  2>&1 | f | tail -4
pack
