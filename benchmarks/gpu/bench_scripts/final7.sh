# One H200 call (stop 13 final): final.sh (cold 7B start-up, both shapes' workloads, 0.6B parity, transformers
# in the same run for 7B seed8 and 0.6B bs1, GPU tests) plus 7B bs1 beside transformers, batch-1 greedy parity
# on the 7B shape, and the split decode tiles at a 4,096-token context (B = 1 and 8, graphs sized for 32,768).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final7.sh  (carry .whl)
export SKIP_LARGE=1 GPU_TESTS="tests/test_kernels.py tests/test_kernels_decode_fused.py"
bash benchmarks/gpu/bench_scripts/final.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/final7
mkdir -p $R/offline $R/smoke
timeout 150 $B bench offline --backend hf,tachyon --model qwen2.5-7b --dummy --workload bs1 \
  --output $R/offline/bs1_qwen2.5-7b.json --report-dir $R/offline 2>&1 | grep -v "Loading weights" | tail -4
timeout 100 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 --context 4096 --max-model-len 32768 \
  --variants auto,dtile=128:4:2+ftile=128:4:2 --out $R/tiles_4096 2>&1 | grep -v -i warn | tail -2
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1 --parity --parity-single \
  --out $R/smoke 2>&1 | grep -v -i warn | grep "parity\|'identical'" | tail -2
tar czf $OUT/final7.tgz -C $R .
