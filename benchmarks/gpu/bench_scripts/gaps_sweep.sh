# One H200 call (session 8): where the batch-1 engine leaves the GPU idle between steps (engine_gaps.py, both
# shapes), the 0.6B bs1 step kernel by kernel (auto vs the whole-row down projection that won 0.026 ms), a
# sweep of whole-row GEMV configs per 0.6B layer (plain and fused), and the 7B B=256 step at a 640-token
# context (nano256's large-batch decode) kernel by kernel.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/gaps_sweep.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "^\s*$"; }
timeout 90 python3 benchmarks/gpu/engine_gaps.py --shape qwen3-0.6b --out $OUT/gaps 2>&1 | f | tail -14
timeout 80 python3 benchmarks/gpu/step_trace.py --shape qwen3-0.6b --variants auto,gemv.down_proj=2:4096:8:1 \
  --out $OUT/trace06 2>&1 | f | tail -2
V=auto,gemv.down_proj=2:4096:8:1,gemv.down_proj=1:4096:4:1,gemv.down_proj=2:4096:4:1,gemv.down_proj=4:4096:8:1
V=$V,gemv.down_proj=4:4096:16:1,gemv.down_proj=1:4096:8:1,fused.down_proj=2:4096:8:1,fused.down_proj=4:4096:8:1
V=$V,gemv.gate_up_proj=4:1024:4:1,gemv.gate_up_proj=2:1024:4:1,gemv.gate_up_proj=8:1024:4:1,gemv.o_proj=1:2048:4:1
V=$V,gemv.o_proj=2:2048:8:1,gemv.qkv_proj=2:1024:4:1,gemv.qkv_proj=8:1024:8:1,fused.qkv_proj=4:1024:4:1
V=$V,fused.gate_up_proj=4:1024:4:1
timeout 200 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 2 --variants $V --out $OUT/sweep06 2>&1 \
  | f | tail -36 | cut -c1-90
timeout 120 python3 benchmarks/gpu/step_trace.py --shape qwen2.5-7b --batches 256 --context 640 --replays 3 \
  --out $OUT/trace7_256 2>&1 | f | tail -2
timeout 90 python3 benchmarks/gpu/engine_gaps.py --shape qwen2.5-7b --out $OUT/gaps7 2>&1 | f | tail -8
