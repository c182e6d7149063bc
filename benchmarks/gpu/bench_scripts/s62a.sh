# Stop 62. On an H200: #3's acceptance steps (STEPS, default nano_7,bs1_06; acceptance.sh). On any other card: the GPU
# kernel tests at real sizes (tests/test_kernels*.py, 8 workers; the last whole run was stop 56's), ~2 min.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s62a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7,bs1_06}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
timeout 300 python3 -m pytest -q -n 8 -p no:cacheprovider -rf tests/test_kernels*.py 2>&1 | tail -40 \
  | tee $OUT/gpu_tests.txt
