# Stop 56: the batch-1 layer kernel's five-launch form (TACHYON_LAYER_BS1=phases), which beat the default in
# s55a's engine A/B on an H100 (1,270 vs 1,217 tok/s, Qwen3-0.6B bs1) while the one-launch forms lost. Steps
# (comma-separated argument, default all):
#   tests   the layer kernel's tests on the GPU (bf16 whole-layer comparison norm-wise, close_layer)
#   engine  0.6B engine bs1 A/B, decode graphs re-captured per variant, two alternating rounds: default, phases at
#           16 / 8 / 4 warps
#   trace   the replayed bs1 step's kernels at a 256-token context: default against phases
#   parity  greedy parity at batch 1 against the torch reference path with phases on (engine_smoke.py)
#   bench   `bench offline` bs1, engine alone, off / phases alternating processes, 2 rounds of 3 repeats
# ~7-8 minutes on a warm machine. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s56a.sh [steps]
. benchmarks/gpu/bench_scripts/env.sh
STEPS=",${1:-tests,engine,trace,parity,bench},"
want() { case $STEPS in *",$1,"*) echo "== $1 $(date +%T)"; return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee -a $OUT/gpu.txt
if want tests; then
  timeout 200 python3 -m pytest -q tests/test_kernels_layer_bs1.py 2>&1 | tail -12 | tee $OUT/pytest_layer_bs1.txt
fi
if want engine; then
  V=auto,layer=phases,layer=phases+lwarps=8,layer=phases+lwarps=4
  timeout 150 python3 benchmarks/gpu/engine_gaps.py --shape qwen3-0.6b --out $OUT/gaps --no-profile --variants $V,$V \
    2>&1 | f | grep "tok/s\|Error\|error" | cut -c1-110
fi
if want trace; then
  timeout 150 python3 benchmarks/gpu/step_trace.py --shape qwen3-0.6b --context 256 --out $OUT/trace \
    --variants auto,layer=phases 2>&1 | f | tail -40 | cut -c1-160
fi
if want parity; then
  TACHYON_LAYER_BS1=phases timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 \
    --parity --parity-single --tag _layer_bs1_phases --out $OUT/smoke 2>&1 | f | grep -i "parity\|identical\|error" \
    | tail -4
fi
if want bench; then
  for r in 1 2; do for m in off phases; do
    TACHYON_LAYER_BS1=$m timeout 100 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 \
      --repeats 3 --output $OUT/bs1_qwen3-0.6b_layer-${m}_r$r.json 2>&1 | f | grep "runs:\|^| tachyon \|rror" \
      | sed "s/^/layer=$m r$r /"
  done; done
fi
echo "== done $(date +%T)"
(cd $OUT && tar czf /tmp/s56a.tgz . && rm -rf ./* && mv /tmp/s56a.tgz .)  # at most 8 files come back
