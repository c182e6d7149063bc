# Session 10's H200 calls. Part "a": the unfiltered-sampling twin graphs on and off (TACHYON_UNFILTERED_GRAPHS,
# alternating rounds of engine_gaps.py, both shapes, the 0.6B engine as the acceptance run builds it), then the
# acceptance workloads beside transformers in one run each (tachyon bench offline --backend hf,tachyon: 7B bs1,
# 0.6B bs1, 7B seed8) and greedy parity with the torch reference path at batch 1 on both shapes. Part "b": every
# standard workload on each shape (engine_smoke.py, one process per shape) and the GPU kernel tests.
# Each part's results are packed into $OUT/final10_<part>.tgz as they come (a timeout keeps what was done).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final10.sh a|b (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
PART=$1
R=/tmp/final10_$PART
mkdir -p $R/offline $R/smoke
pack() { tar czf $OUT/final10_$PART.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if [ "$PART" = a ]; then
  for run in "qwen3-0.6b 0 100" "qwen2.5-7b 4096 120"; do
    set -- $run
    mkdir -p $R/gaps_$1
    timeout $3 python3 benchmarks/gpu/engine_gaps.py --shape $1 --max-model-len $2 --no-profile \
      --variants auto,ugraph=0,auto,ugraph=0 --out $R/gaps_$1 2>&1 | f | grep "tok/s" | cut -c1-90
  done
  pack
  for run in "qwen2.5-7b bs1 150" "qwen3-0.6b bs1 90" "qwen2.5-7b seed8 150"; do
    set -- $run
    timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output $R/offline/$2_$1.json \
      --report-dir $R/offline 2>&1 | f | grep "^| \(hf\|tachyon\) " | head -2
    pack
  done
  for shape in qwen3-0.6b qwen2.5-7b; do
    timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes $shape --workloads bs1 --parity --parity-single \
      --tag _parity --out $R/smoke 2>&1 | f | grep -i "parity\|identical" | tail -3
  done
else
  for shape in qwen3-0.6b qwen2.5-7b; do
    timeout 200 python3 benchmarks/gpu/engine_smoke.py --shapes $shape --out $R/smoke 2>&1 | f | tail -4
    pack
  done
  timeout 200 python3 -m pytest -q tests/test_kernels_gemv.py tests/test_kernels_embedding.py tests/test_kernels.py \
    tests/test_kernels_decode_fused.py tests/test_kernels_sampling.py 2>&1 | tail -2 | tee $R/gpu_tests.txt
  pack
  # 7B parity at batch 1 with the fast token's rank and log-prob gap under the reference, with the prefill
  # attention table and with the single config it replaced (is a new divergence the prefill tile's rounding?)
  timeout 110 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1 --parity --parity-single \
    --tag _parity --out $R/smoke 2>&1 | f | grep -i "parity\|identical" | tail -2
  pack
  TACHYON_PREFILL_TILE=128:32:4:3 timeout 110 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b \
    --workloads bs1 --parity --parity-single --tag _parity_oldtile --out $R/smoke 2>&1 | f | grep -i "parity\|identical" | tail -2
fi
pack
