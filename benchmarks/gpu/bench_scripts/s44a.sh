# Stop 44's first call (~6 minutes on a warm machine): stop 43's unrun energy split (s38a.sh), then the GPU kernel
# tests and one engine-alone 7B nano256 (nvidia-smi at 100 ms beside it) at this tree, which moved the mixed step's
# attention dispatch into Attention.attend_mixed after the acceptance run.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s44a.sh
bash benchmarks/gpu/bench_scripts/s38a.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s44a
mkdir -p $R
timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -3 | tee $R/gpu_tests.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi_nano_7b.csv 2>&1 &
SMI=$!
timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
  --output $R/nano256_7b.json 2>&1 | f | grep "^| tachyon\|Error"
kill $SMI
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
tar czf $OUT/s44a.tgz -C $R .
