. benchmarks/gpu/bench_scripts/env.sh
timeout 200 $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload bs1 --output /tmp/res/bs1_qwen3-0.6b.json --report-dir /tmp/res 2>&1 | grep -v "Loading weights"
timeout 330 $B bench offline --backend hf,tachyon --model qwen2.5-7b --dummy --workload seed8 --output /tmp/res/seed8_qwen2.5-7b.json --report-dir /tmp/res 2>&1 | grep -v "Loading weights"
tar czf $OUT/offline.tgz -C /tmp res
