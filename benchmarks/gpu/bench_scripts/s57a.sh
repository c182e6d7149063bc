# Stop 57: #3's acceptance on an H200 only (stop 56 saw only H100s). On any other card it stops at once, so the caller
# can hand the machine back and try again later. STEPS picks acceptance.sh's steps (default startup,bs1_06,nano_7:
# the new batch-1 default's figure and the power-bound 7B nano256; ~7.5 minutes). Usage (device, repo root; carry
# .whl): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s57a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if ! grep -q H200 $OUT/gpu.txt; then echo "== not an H200: nothing run"; exit 0; fi
bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-startup,bs1_06,nano_7}
