# One H200 call: kernel tests with PDL, then decode-step profiles (replay, bs1 TPOT, seed8 loop) with
# programmatic dependent launch on (re-tuning every GEMV choice) and off; brings the tuning cache back.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/pdl.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py tests/test_kernels_sampling.py \
  tests/test_kernels_fused.py tests/test_kernels_gemv.py 2>&1 | tail -6
mkdir -p $OUT/on $OUT/off
TACHYON_RETUNE=1 timeout 240 python3 benchmarks/gpu/profile_step.py --out $OUT/on 2>&1 | grep -v -i warn | head -40
cp ~/.cache/tachyon/kernel_tuning.json $OUT/
TACHYON_PDL=0 timeout 150 python3 benchmarks/gpu/profile_step.py --out $OUT/off 2>&1 | grep -v -i warn | grep "start-up\|TPOT"
