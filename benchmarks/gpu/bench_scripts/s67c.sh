# Stop 67 (not run: no device time left). s67a.sh's idle probe ran straight-after-start-up first and 10 s idle second
# (55.4 against 36.4 ms for the first request), so process order is confounded with idling. This alternates them
# (0, 10, 0, 10, then 2 s), each a fresh engine process on the same warm Triton cache, the engine alone, no warm-up
# request, the first 16 of stop 65's server arrivals. ~3 min on any card. Results: idle_ab.tgz, idle_ab.txt.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s67c.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
source benchmarks/gpu/bench_scripts/env.sh
mkdir -p /tmp/res/idle_ab
LOG=benchmarks/results/session54/s64b_serve/serve_cap.requests.jsonl.gz
n=0
for idle in 0 10 0 10 2; do
  n=$((n + 1))
  timeout 120 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --num 16 --long-every 8 --long-len 8192 \
    --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=512 --engine-arg scheduling_policy=fcfs \
    --arrivals-from $LOG --min-tokens --warmup 0 --engine-thread --idle-before $idle --tag run${n}_idle$idle \
    --out /tmp/res/idle_ab 2>&1 | f | tail -1 | cut -c1-200
done
python3 - <<'PY' | tee $OUT/idle_ab.txt
import glob, json
for path in sorted(glob.glob("/tmp/res/idle_ab/arrivals_*.json")):
    d = json.load(open(path))
    print(path.rsplit("_", 2)[-2:], {r["id"]: r["ttft_ms"] for r in d["requests"] if r["id"] in ("a0", "a1", "a2", "a3")})
PY
tar czf $OUT/idle_ab.tgz -C /tmp/res idle_ab
