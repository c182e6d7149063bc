# Session 13, fourth call (fresh machine): (1) Qwen2.5-7B cold start-up with the cuBLASLt picks timed in its
# warm-up, then Qwen3-0.6B; the picks they remembered copied out; (2) GPU tests of the GEMV / skinny GEMM / tuning
# files (fp32 logits from cuBLAS, cuBLASLt linear); (3) nano256 on both shapes, the picks on against off
# (TACHYON_BLAS_PICK=0), alternating, nvidia-smi beside. Packed into $OUT/lt13.tgz as they come.
# Usage (device, repo root, fresh machine): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/lt13.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/lt13
mkdir -p $R/startup $R/smoke
pack() { tar czf $OUT/lt13.tgz -C $R .; }
timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup 2>&1 | grep -v -i warn | tail -1
timeout 90 python3 benchmarks/gpu/startup.py --shape qwen3-0.6b --out $R/startup 2>&1 | grep -v -i warn | tail -1
cp ~/.cache/tachyon/kernel_tuning.json $R/ 2>/dev/null
pack
timeout 150 python3 -m pytest -q tests/test_kernels_gemv.py tests/test_kernels_tuning.py 2>&1 \
  | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
run() {  # variant shape
  unset TACHYON_BLAS_PICK
  [ $1 = nolt ] && export TACHYON_BLAS_PICK=0
  echo "$(date +%T.%N) $1 $2" >> $R/order.txt
  timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes $2 --workloads nano256 --tag _$1 --out $R/smoke \
    2>&1 | f | grep -v "^{" | tail -1 | sed "s/^/$1 /" | tee -a $R/order.txt
  pack
}
for v in lt nolt lt nolt; do run $v qwen2.5-7b; done
for v in lt nolt; do run $v qwen3-0.6b; done
kill $SMI
pack
