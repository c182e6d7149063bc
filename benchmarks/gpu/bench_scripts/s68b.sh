# Stop 68, after s68a.sh found HEAD's 7B nano256 start ~70-155 ms late against stop 49's engine (every request's
# first token shifted by one constant; steady decode identical) and the CPU traced it to token_id_list's per-token
# isinstance on numbers.Integral (256 prompts, 142,616 ids). On an H200: #3's 7B nano256 step (acceptance.sh nano_7,
# ~470 s). On any other card: one old/new pair of s67d.sh (~2.5 min) to confirm the shift is gone.
# Usage (device, repo root; carry .whl and .old): TACHYON_GIT_SHA=<sha here> bash benchmarks/gpu/bench_scripts/s68b.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh nano_7
  exit
fi
ROUNDS=1 bash benchmarks/gpu/bench_scripts/s67d.sh
