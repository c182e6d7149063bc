# One H200 call: decode-step replays under PDL size thresholds for the batch-1 GEMVs (TACHYON_PDL_GEMV_MAX_MB) and
# with Triton skinny GEMMs forced on the layers the warm-up leaves on cuBLAS at B=8 (PDL-launched instead).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/pdl_cfg_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 200 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b \
  --variants auto,maxmb=16,maxmb=130,maxmb=260,maxmb=1000,pdlg=start,small.qkv_proj=1:64:128:4:4:4,small.qkv_proj=1:64:128:4:4:1 \
  --out $OUT/step_ab_7b 2>&1 | grep -v -i warn | tail -17
timeout 120 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b \
  --variants auto,maxmb=400,small.gate_up_proj=1:64:128:4:4:1,small.gate_up_proj=1:64:128:4:4:4,small.qkv_proj=1:64:128:4:4:4 \
  --out $OUT/step_ab_06b 2>&1 | grep -v -i warn | tail -11
