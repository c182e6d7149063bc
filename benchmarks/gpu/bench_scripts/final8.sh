# Session 8's final H200 calls. Part "a": the acceptance workloads beside transformers in one run each (tachyon bench
# offline --backend hf,tachyon: 7B bs1, 0.6B bs1, 7B seed8) and greedy parity with the torch reference path
# (0.6B batch 4 and batch 1, 7B batch 1). Part "b": every standard workload on both shapes (engine_smoke), the PDL
# on/off bit-for-bit check, and the GEMV kernel tests on the GPU. Results packed into $OUT/final8_<part>.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final8.sh a|b (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
PART=$1
R=/tmp/final8_$PART
mkdir -p $R/offline $R/smoke
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if [ "$PART" = a ]; then
  for run in "qwen2.5-7b bs1 150" "qwen3-0.6b bs1 90" "qwen2.5-7b seed8 150"; do
    set -- $run
    timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output $R/offline/$2_$1.json \
      --report-dir $R/offline 2>&1 | f | grep "^| \(hf\|tachyon\) " | head -2
  done
  timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --parity --parity-single \
    --out $R/smoke 2>&1 | f | grep -i "parity\|identical" | tail -3
  timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1 --parity --parity-single \
    --tag _parity7 --out $R/smoke 2>&1 | f | grep -i "parity\|identical" | tail -3
else
  timeout 200 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b,qwen2.5-7b --out $R/smoke 2>&1 | f | tail -8
  timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b,qwen2.5-7b --workloads bs1 --pdl-check \
    --tag _pdl --out $R/smoke 2>&1 | f | grep "pdl_on_vs_off" | cut -c1-200
  timeout 150 python3 -m pytest -q tests/test_kernels_gemv.py tests/test_kernels_embedding.py 2>&1 | tail -2 \
    | tee $R/gpu_tests.txt
fi
tar czf $OUT/final8_$PART.tgz -C $R .
