# Acceptance of Qwen2.5-7B nano256 at the deadline fill (flat's new default), beside transformers, then Qwen3-0.6B
# nano256 with Tachyon alone (~7.5 minutes on a cold machine; the device time left did not hold 0.6B's transformers).
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s45d.sh
bash benchmarks/gpu/bench_scripts/acceptance.sh nano_7
. benchmarks/gpu/bench_scripts/env.sh
timeout 90 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload nano256 \
  --output /tmp/acceptance/offline/nano256_qwen3-0.6b_tachyon_alone.json 2>&1 | f | grep "^| tachyon\|Error"
tar czf $OUT/acceptance.tgz -C /tmp/acceptance .
