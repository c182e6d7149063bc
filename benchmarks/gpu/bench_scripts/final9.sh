# Session 9's H200 calls. Part "a": the acceptance workloads beside transformers in one run each (tachyon bench
# offline --backend hf,tachyon: 7B bs1, 0.6B bs1, 7B seed8) and greedy parity with the torch reference path at
# batch 1 on both shapes (their short contexts replay the short-tile twin). Part "b": every standard workload on
# each shape (engine_smoke, one process per shape), the PDL on/off bit-for-bit check, and the GPU kernel tests.
# Part "c": the short-tile twin on and off (TACHYON_DECODE_SHORT_TILE) at prompt lengths on both sides of each
# shape's rule (0.6B: 1,024 keys; 7B: 2,048; the twin was reverted after this part). Part "t": the GPU kernel tests
# alone. Results packed into $OUT/final9_<part>.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final9.sh a|b|c|t (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
PART=$1
R=/tmp/final9_$PART
mkdir -p $R/offline $R/smoke
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if [ "$PART" = a ]; then
  for run in "qwen2.5-7b bs1 150" "qwen3-0.6b bs1 90" "qwen2.5-7b seed8 150"; do
    set -- $run
    timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output $R/offline/$2_$1.json \
      --report-dir $R/offline 2>&1 | f | grep "^| \(hf\|tachyon\) " | head -2
  done
  for shape in qwen3-0.6b qwen2.5-7b; do
    timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes $shape --workloads bs1 --parity --parity-single \
      --tag _parity --out $R/smoke 2>&1 | f | grep -i "parity\|identical" | tail -3
  done
elif [ "$PART" = b ]; then
  for shape in qwen3-0.6b qwen2.5-7b; do
    timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes $shape --out $R/smoke 2>&1 | f | tail -4
  done
  for shape in qwen3-0.6b qwen2.5-7b; do
    timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes $shape --workloads bs1 --pdl-check --tag _pdl \
      --out $R/smoke 2>&1 | f | grep "pdl_on_vs_off" | cut -c1-200
  done
  [ -n "$SKIP_TESTS" ] || timeout 200 python3 -m pytest -q tests/test_kernels_gemv.py tests/test_kernels_embedding.py \
    tests/test_kernels.py tests/test_kernels_decode_fused.py 2>&1 | tail -2 | tee $R/gpu_tests.txt
elif [ "$PART" = t ]; then
  timeout 200 python3 -m pytest -q tests/test_kernels_gemv.py tests/test_kernels_embedding.py tests/test_kernels.py \
    tests/test_kernels_decode_fused.py 2>&1 | tail -2 | tee $R/gpu_tests.txt
else
  # "0": the model's own max_model_len, as the acceptance run (tachyon bench offline) builds the engine
  for run in "qwen3-0.6b 128 0" "qwen3-0.6b 768 4096" "qwen3-0.6b 1536 4096" "qwen2.5-7b 1536 4096"; do
    set -- $run
    mkdir -p $R/$1_$2_$3
    timeout 150 python3 benchmarks/gpu/engine_gaps.py --shape $1 --prompt-len $2 --max-model-len $3 --no-profile \
      --variants auto,stile=0,auto,stile=0 --out $R/$1_$2_$3 2>&1 | f | grep "tok/s" | cut -c1-90
  done
fi
tar czf $OUT/final9_$PART.tgz -C $R .
