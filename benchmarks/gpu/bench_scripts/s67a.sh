# Stop 67. On an H200: #3's Qwen2.5-7B nano256 acceptance step (acceptance.sh nano_7, ~470 s). On any other card:
# late_compile_check.py on Qwen3-0.6B with enforce_eager (stop 67's eager compile probes; 18 late compiles before),
# at the defaults, and on Qwen2.5-7B under the server's policy (s66c.sh), then the idle-before probe (s66d.sh).
# ~6 min. Results: acceptance.tgz (H200) or late_c.tgz + idle.tgz.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s67a.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh nano_7
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
mkdir -p /tmp/res/late_c
late() {  # tag, timeout, args...
  local tag=$1 limit=$2; shift 2
  timeout $limit python3 benchmarks/gpu/late_compile_check.py "$@" --out /tmp/res/late_c/$tag \
    > /tmp/res/late_c/$tag.log 2>&1
  echo "$tag rc $?"
  grep -v "Loading weights" /tmp/res/late_c/$tag.log | grep "late \|total_late\|ready in" | cut -c1-160
}
late eager06 120 --shape qwen3-0.6b --engine-arg enforce_eager=True
late default06 120 --shape qwen3-0.6b
late fcfs7 150 --shape qwen2.5-7b --engine-arg scheduling_policy=fcfs --engine-arg max_model_len=16384
tar czf $OUT/late_c.tgz -C /tmp/res late_c
bash benchmarks/gpu/bench_scripts/s66d.sh 2>&1 | tail -4
