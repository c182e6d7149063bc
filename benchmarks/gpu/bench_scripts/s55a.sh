# The batch-1 decoder-layer kernel (kernels/layer_bs1.py, TACHYON_LAYER_BS1), first GPU run (stop 55 built it on
# CPU only). Steps (comma-separated argument, default all; each with its own timeout, so a hang, e.g. a grid
# barrier whose programs are not all resident, costs one step):
#   tests   its kernel tests on the GPU: the one-launch form against the five-launch form (16 / 8 warps, next /
#           early prefetch), bf16 and fp32, both layouts (~1-2 min, mostly compiles)
#   rows    run_all.py's layer rows at the Qwen3-0.6B shape, 256 and 4,096 keys (one launch with either prefetch,
#           five launches), against the floor and the reference
#   engine  one 0.6B engine, bs1 generation timed with its decode graphs re-captured per variant, two alternating
#           rounds: the default, the layer kernel at 16 and 8 warps, with the early weight prefetch, without the
#           early attention tile, its five-launch form, and the model kernel (every layer in one launch) at 16 / 8
#           warps
#   trace   the replayed bs1 step's kernels at a 256-token context: default, layer kernel, model kernel
#           (step_trace.py)
#   parity  greedy parity at batch 1 against the torch reference path, layer kernel on, then model kernel on
#           (engine_smoke.py)
#   bench   `bench offline` bs1, engine alone, off / fused / model alternating processes, 3 repeats each
# All six take ~8-9 minutes on a warm machine: split them over two calls (tests,rows,engine then trace,parity,bench).
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s55a.sh [steps]
. benchmarks/gpu/bench_scripts/env.sh
STEPS=",${1:-tests,rows,engine,trace,parity,bench},"
want() { case $STEPS in *",$1,"*) echo "== $1 $(date +%T)"; return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee -a $OUT/gpu.txt
if want tests; then
  timeout 240 python3 -m pytest -q -x tests/test_kernels_layer_bs1.py 2>&1 | tail -15 | tee $OUT/pytest_layer_bs1.txt
fi
if want rows; then
  (cd benchmarks/kernels && timeout 150 python3 run_all.py --only layer_bs1 --out $OUT/kernels 2>&1 | f | tail -8)
fi
if want engine; then
  V=auto,layer=fused,layer=fused+lwarps=8,layer=fused+lpf=early,layer=fused+lwarps=8+lpf=early,layer=fused+ltile=0
  V=$V,layer=phases,layer=model,layer=model+lwarps=8
  timeout 300 python3 benchmarks/gpu/engine_gaps.py --shape qwen3-0.6b --out $OUT/gaps --no-profile --variants $V,$V \
    2>&1 | f | grep "tok/s\|Error\|error" | cut -c1-160
fi
if want trace; then
  timeout 200 python3 benchmarks/gpu/step_trace.py --shape qwen3-0.6b --context 256 --out $OUT/trace \
    --variants auto,layer=fused,layer=model 2>&1 | f | tail -30 | cut -c1-160
fi
if want parity; then
  for m in fused model; do
    TACHYON_LAYER_BS1=$m timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 \
      --parity --parity-single --tag _layer_bs1_$m --out $OUT/smoke 2>&1 | f | grep -i "parity\|identical\|error" \
      | tail -4 | sed "s/^/layer=$m /"
  done
fi
if want bench; then
  for r in 1 2; do for m in off fused model; do
    TACHYON_LAYER_BS1=$m timeout 120 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 \
      --repeats 3 --output $OUT/bs1_qwen3-0.6b_layer-${m}_r$r.json 2>&1 | f | grep "runs:\|^| tachyon \|rror" \
      | sed "s/^/layer=$m r$r /"
  done; done
fi
echo "== done $(date +%T)"
