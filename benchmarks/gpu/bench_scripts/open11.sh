# Session 11's first H200 call: what stop 16 left unmeasured. (1) 7B engine start-up on a fresh machine (cold
# Triton cache; the twin graphs added captures since stop 12's 14.9 s), (2) the four GPU sampling tests a
# timeout cut at stop 16, (3) open10.sh's two A/B questions (twins at max_model_len 4,096; the fused decode
# kernel's early tile at B >= 2). Results packed into $OUT/open11.tgz as they come.
# Usage (device, repo root, fresh machine): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/open11.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/open11
mkdir -p $R/startup
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $R/gpu.txt
timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup 2>&1 | grep -v -i warn | tail -3
tar czf $OUT/open11.tgz -C $R .
timeout 120 python3 -m pytest -q tests/test_kernels_sampling.py -k \
  "batch_independent or scratch_segments or writes_into_out or fast_gumbel" 2>&1 | tail -2 | tee $R/sampling_tests.txt
tar czf $OUT/open11.tgz -C $R .
OUT=$R bash benchmarks/gpu/bench_scripts/open10.sh
tar czf $OUT/open11.tgz -C $R .
