# Stop 66 (not run: no device time left). Is the server's first-request cost (~60 ms at stop 66, 92.8 ms server-side
# against 31.8 for the engine alone started cold) the GPU idling before it? The engine alone, cold (no warm-up
# request), on the first 16 of stop 65's server arrivals: straight after start-up, and after 10 s idle (the server
# idles while the client starts), with nvidia-smi sampling SM clock and power every 50 ms beside. ~2 min on an H100.
# Results: idle.tgz. Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s66d.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
source benchmarks/gpu/bench_scripts/env.sh
mkdir -p /tmp/res/idle
LOG=benchmarks/results/session54/s64b_serve/serve_cap.requests.jsonl.gz
for idle in 0 10; do
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 50 > /tmp/res/idle/smi_idle$idle.csv 2>&1 &
  SMI=$!
  timeout 120 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --num 16 --long-every 8 --long-len 8192 \
    --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=512 --engine-arg scheduling_policy=fcfs \
    --arrivals-from $LOG --min-tokens --warmup 0 --engine-thread --idle-before $idle --tag idle$idle \
    --out /tmp/res/idle 2>&1 | f | tail -1 | cut -c1-300
  kill $SMI
done
python3 - <<'PY' | tee $OUT/idle.txt
import json
for idle in (0, 10):
    d = json.load(open(f"/tmp/res/idle/arrivals_qwen2.5-7b_idle{idle}.json"))
    print(idle, {r["id"]: r["ttft_ms"] for r in d["requests"] if r["id"] in ("a0", "a1", "a2", "a3")})
PY
tar czf $OUT/idle.tgz -C /tmp/res idle
