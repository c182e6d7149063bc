# Stop 67, after s67a.sh found 5 late compiles on Qwen3-0.6B at the defaults (a long prompt's eager prefill: the kept
# row's split decode + merge, three batch-1 GEMVs). The eager step classes now compile in a second pass at start-up,
# with graphs too. On an H200: #3's Qwen2.5-7B nano256 step (acceptance.sh nano_7, ~470 s). On any other card: the
# cold 7B start-up (the second pass's cost) and late_compile_check.py on both shapes at the defaults (acceptance.sh
# startup,late), then 0.6B under enforce_eager. ~5 min. Results: acceptance.tgz (+ late_eager.tgz).
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s67b.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh nano_7
  exit
fi
bash benchmarks/gpu/bench_scripts/acceptance.sh startup,late
grep -h "late \|total_late" /tmp/acceptance/late/*.log | grep -v "late  0 " | cut -c1-200
mkdir -p /tmp/res/late_eager
timeout 120 python3 benchmarks/gpu/late_compile_check.py --shape qwen3-0.6b --engine-arg enforce_eager=True \
  --out /tmp/res/late_eager > /tmp/res/late_eager/eager06.log 2>&1; echo "eager06 rc $?"
tail -1 /tmp/res/late_eager/eager06.log
tar czf $OUT/late_eager.tgz -C /tmp/res late_eager
