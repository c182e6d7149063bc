# Stop 68. On an H200: #3's Qwen2.5-7B nano256 step (acceptance.sh nano_7, ~470 s). On any other card: s67d.sh (stop
# 49's engine against this tree, alternating, 7B nano256 at the 700 W cap: a per-MHz regression?) then s67c.sh (the
# idle probe alternated), ~7 min. Results: acceptance.tgz, or ab49.tgz/ab49.txt and idle_ab.tgz/idle_ab.txt.
# Usage (device, repo root; carry .whl and .old): TACHYON_GIT_SHA=<sha here> bash benchmarks/gpu/bench_scripts/s68a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh nano_7
  exit
fi
bash benchmarks/gpu/bench_scripts/s67d.sh
bash benchmarks/gpu/bench_scripts/s67c.sh
