# Stop 66. On an H200: #3's acceptance steps (STEPS, default nano_7; acceptance.sh). On any other card: does any common
# request kind still compile Triton kernels after start-up, now that the eager sampler's rows are aligned and its draw
# is compiled at start-up (stop 65's probe warm-up paid 5.3 s of late sampling-kernel compiles)?
# late_compile_check.py on Qwen2.5-7B (defaults) and Qwen3-0.6B with enforce_eager (every step eager). ~2 min.
# Results: late.tgz (JSON and full logs, warnings included). Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s66b.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
mkdir -p /tmp/res/late
timeout 180 python3 benchmarks/gpu/late_compile_check.py --shape qwen2.5-7b --out /tmp/res/late \
  > /tmp/res/late/qwen2.5-7b.log 2>&1; echo "rc $?"
grep -v "Loading weights" /tmp/res/late/qwen2.5-7b.log | tail -22 | cut -c1-260
timeout 150 python3 benchmarks/gpu/late_compile_check.py --shape qwen3-0.6b --engine-arg enforce_eager=True \
  --out /tmp/res/late/eager > /tmp/res/late/qwen3-0.6b_eager.log 2>&1; echo "rc $?"
grep -v "Loading weights" /tmp/res/late/qwen3-0.6b_eager.log | tail -22 | cut -c1-260
tar czf $OUT/late.tgz -C /tmp/res late
