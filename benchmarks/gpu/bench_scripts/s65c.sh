# Stop 65. On an H200: #3's acceptance steps (STEPS, default bs1_06; acceptance.sh). On any other card: the engine now
# hands a launched step's tokens out before running a synchronous step after it (a long prompt's chunk), where it
# held them for that whole step. s64b.sh's server run again (all 256 nano256 requests at 4 a second, every 8th prompt
# 8,192 tokens, through `tachyon serve` at its defaults, access lines kept), then the engine alone on that run's
# arrivals with arrivals_probe.py, whose TTFT now runs to the step call that returns the first token (min_tokens =
# max_tokens, as `bench serve` sends; cap 512). ~4 min on an H100. Results in serve.tgz and arrivals.tgz.
# Needs .tok and .whl_serve carried with .whl (s60c.sh's header says how they are made).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s65c.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-bs1_06}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl_serve/*.whl || exit 1
mkdir -p /tmp/res/serve
python3 - <<'PY'
import json
from tachyon.bench.workloads import load_workload
reqs = []
for j, r in enumerate(load_workload("nano256").requests):
    ids = list(r.prompt_token_ids)
    if j % 8 == 7:
        ids = (ids * (8192 // len(ids) + 1))[:8192]
    reqs.append({"prompt_token_ids": ids, "max_tokens": r.max_tokens})
json.dump({"name": "nano256_long8", "requests": reqs}, open("/tmp/long8.json", "w"))
PY
python3 -m tachyon.serving --model qwen2.5-7b --load-format dummy --tokenizer .tok --max-model-len 9216 \
  --served-model-name qwen2.5-7b-dummy --port 8000 > /tmp/res/serve/server.log 2>&1 &
SPID=$!
wait_healthy
timeout 200 $B bench serve --base-url http://127.0.0.1:8000 --model qwen2.5-7b-dummy --dataset workload \
  --dataset-path /tmp/long8.json --vocab-size 49152 --num-prompts 256 --process poisson --rate 4 --exact-chunk-tokens \
  --output /tmp/res/serve/serve_cap.json --no-progress 2>&1 | tail -4 | tee /tmp/res/serve/serve_cap.txt
kill $SPID; wait $SPID 2>/dev/null
gzip -f /tmp/res/serve/server.log /tmp/res/serve/*.requests.jsonl
tar czf $OUT/serve.tgz -C /tmp/res serve
LOG=benchmarks/results/session54/s64b_serve/serve_cap.requests.jsonl.gz
timeout 200 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --num 256 --long-every 8 --long-len 8192 \
  --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=512 --engine-arg scheduling_policy=fcfs \
  --arrivals-from $LOG --min-tokens --tag delivered_lp512_min --out /tmp/res/arrivals 2>&1 | f | tail -1 \
  | tee -a $OUT/arrivals.txt
tar czf $OUT/arrivals.tgz -C /tmp/res arrivals
