# Stop 66. late_compile_check.py on what s66b.sh did not cover: Qwen3-0.6B at the engine defaults (graphs on; s66b ran
# it eager only, where 18 kernels compiled late) and Qwen2.5-7B under the server's policy (fcfs, 16,384-token
# context). ~2 min on any card. Results: late_c.tgz. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s66c.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
source benchmarks/gpu/bench_scripts/env.sh
mkdir -p /tmp/res/late_c
timeout 120 python3 benchmarks/gpu/late_compile_check.py --shape qwen3-0.6b --out /tmp/res/late_c \
  > /tmp/res/late_c/qwen3-0.6b.log 2>&1; echo "rc $?"
grep -v "Loading weights" /tmp/res/late_c/qwen3-0.6b.log | tail -21 | cut -c1-200
timeout 150 python3 benchmarks/gpu/late_compile_check.py --shape qwen2.5-7b --engine-arg scheduling_policy=fcfs \
  --engine-arg max_model_len=16384 --out /tmp/res/late_c/fcfs > /tmp/res/late_c/qwen2.5-7b_fcfs.log 2>&1; echo "rc $?"
grep -v "Loading weights" /tmp/res/late_c/qwen2.5-7b_fcfs.log | tail -21 | cut -c1-200
tar czf $OUT/late_c.tgz -C /tmp/res late_c
