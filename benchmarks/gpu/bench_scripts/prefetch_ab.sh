# One H200 call: GEMVs that ask for their weight slice in L2 before the PDL wait (TACHYON_GEMV_PREFETCH /
# TACHYON_GEMM_SMALL_PREFETCH), with PDL extended to larger GEMVs (TACHYON_PDL_GEMV_MAX_MB), in the decode-step
# replays (bs1, B=8) of both shapes.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/prefetch_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 240 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b \
  --variants auto,maxmb=25,maxmb=32,pf=1+maxmb=25,pf=1+maxmb=32,pf=1+maxmb=130,pf=1+pdlg=start,spf=1,pf=1+maxmb=32+spf=1 \
  --out $OUT/step_ab_7b 2>&1 | grep -v -i warn | tail -19
timeout 100 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --variants auto,pf=1,pf=1+pdlg=start,spf=1 \
  --out $OUT/step_ab_06b 2>&1 | grep -v -i warn | tail -9
