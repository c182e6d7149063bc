# Stop 61. On an H200: #3's acceptance steps (STEPS, default nano_7,bs1_06; acceptance.sh). On any other card: nothing
# (the card's name only), so a call that lands on an H100 costs little more than its start.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s61a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7,bs1_06}
fi
