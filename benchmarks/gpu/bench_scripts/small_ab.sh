# One H200 call: Qwen3-0.6B workloads with parity (prefill graphs on) and bs1 with them off; per-prologue
# fusion A/B of the decode step; the sampler's knob A/B; GPU kernel tests of the fused and sampling kernels.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/small_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
mkdir -p $OUT/smoke
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $OUT/smoke 2>&1 | grep -v -i warn | tail -6
timeout 60 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1,seed8 --prefill-graph-max-tokens 0 \
  --tag _noprefillgraph --out $OUT/smoke 2>&1 | grep -v -i warn | tail -3
timeout 90 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --variants fuse_none,fuse_silu,fuse_norm,auto \
  --out $OUT/step_ab 2>&1 | grep -v -i warn | tail -8
timeout 120 python3 benchmarks/kernels/sample_timing.py --batches 8,256 --modes greedy,top_p0.9 --out $OUT/sample \
  --variants "HIST_BINS=1024;HIST_BINS=512;HIST_BINS=256;PROGRAMS_PER_SM=2;PROGRAMS_PER_SM=8;HIST_BINS=512,PROGRAMS_PER_SM=2" \
  2>&1 | grep -v -i warn | tail -30
timeout 150 python3 -m pytest -q -x tests/test_kernels_fused.py tests/test_kernels_sampling.py 2>&1 | tail -5
