# One H200 call, run first on a fresh machine: cold engine start-up (7B), engine speed on every standard
# workload for both shapes (with greedy parity against the torch reference path on 0.6B), the transformers
# baseline in the same run (7B seed8, 0.6B bs1), and the GPU tests of the kernels this session changed.
# Every result file is packed into $OUT/final.tgz (the device tool brings back at most 8 files).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/final
mkdir -p $R/smoke
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 80 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R 2>&1 | grep -v -i warn | tail -2
timeout 140 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $R/smoke 2>&1 | grep -v -i warn | tail -5
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $R/smoke 2>&1 | grep -v -i warn | tail -6
for run in "qwen2.5-7b seed8 140" "qwen3-0.6b bs1 80"; do
  set -- $run
  timeout $3 $B bench offline --backend hf,tachyon --model $1 --dummy --workload $2 --output /tmp/res/$2_$1.json \
    --report-dir /tmp/res 2>&1 | grep -v "Loading weights" | tail -4
done
mkdir -p $R/offline && cp /tmp/res/*.json /tmp/res/*.md $R/offline/ 2>/dev/null
timeout 200 python3 -m pytest -q ${GPU_TESTS:-tests/test_kernels_sampling.py tests/test_kernels_gemv.py \
  tests/test_kernels_decode_fused.py} 2>&1 | tail -4 | tee $R/gpu_tests.txt
# the fused decode attention at large batch (decode steps of nano256), against qkv_post + attention
[ -n "$SKIP_LARGE" ] || timeout 200 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 --large 64,256 \
  --variants auto,fda=0 --out $R/step_ab_large 2>&1 | grep -v -i warn | tail -3
tar czf $OUT/final.tgz -C $R .
