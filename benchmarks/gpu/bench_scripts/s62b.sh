# Stop 62. On an H200: #3's acceptance steps (STEPS, default nano_7; acceptance.sh). On any other card: the server's
# long-prefill cap through HTTP on the load it is for (stop 60 measured it on the engine alone): the first NUM (128)
# nano256 requests (outputs capped at OUT_CAP, 256, tokens), every 8th prompt its own tokens repeated to 8,192 (a long
# document among chat turns), Poisson arrivals at RATE (4) a second; `tachyon serve` on the Qwen2.5-7B dummy shape with the default cap
# (512, shorter-waiter rule), then with the cap off, each its own server, one run each; TTFT split into the short and
# the long prompts (ttft_split.txt). ~4 min. Results packed in serve.tgz.
# Needs .tok and .whl_serve carried with .whl (s60c.sh's header says how they are made).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> [STEPS=...] [NUM=.. OUT_CAP=.. RATE=..] bash benchmarks/gpu/bench_scripts/s62b.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl_serve/*.whl || exit 1
export NUM OUT_CAP
mkdir -p /tmp/res/serve  # packed into $OUT/serve.tgz: a call returns at most 8 files
python3 - <<'PY'
import json, os
from tachyon.bench.workloads import load_workload
w = load_workload("nano256")
reqs = []
for j, r in enumerate(w.requests[:int(os.environ.get("NUM", "128"))]):
    ids = list(r.prompt_token_ids)
    if j % 8 == 7:
        ids = (ids * (8192 // len(ids) + 1))[:8192]
    reqs.append({"prompt_token_ids": ids, "max_tokens": min(r.max_tokens, int(os.environ.get("OUT_CAP", "256")))})
json.dump({"name": "nano128_long8", "requests": reqs}, open("/tmp/long8.json", "w"))
PY
for tag in shorter lp0; do
  flag=""
  [ $tag = lp0 ] && flag="--long-prefill-token-threshold 0"
  python3 -m tachyon.serving --model qwen2.5-7b --load-format dummy --tokenizer .tok --max-model-len 9216 \
    --served-model-name qwen2.5-7b-dummy --port 8000 $flag > /tmp/res/server_$tag.log 2>&1 &
  SPID=$!
  wait_healthy
  timeout 200 $B bench serve --base-url http://127.0.0.1:8000 --model qwen2.5-7b-dummy --dataset workload \
    --dataset-path /tmp/long8.json --vocab-size 49152 --num-prompts ${NUM:-128} --process poisson --rate ${RATE:-4} --exact-chunk-tokens \
    --output /tmp/res/serve/serve_$tag.json --no-progress 2>&1 | tail -4 | tee /tmp/res/serve/serve_$tag.txt
  kill $SPID; wait $SPID 2>/dev/null
  grep -v tachyon.serving.access /tmp/res/server_$tag.log | grep -i "error\|traceback" | tail -4
  tar czf $OUT/serve.tgz -C /tmp/res serve
done
python3 - <<'PY' | tee /tmp/res/serve/ttft_split.txt
import json, statistics
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
for tag in ("shorter", "lp0"):
    rows = [json.loads(x) for x in open(f"/tmp/res/serve/serve_{tag}.requests.jsonl")]
    ok = [r for r in rows if r.get("first_byte") is not None]
    for name, sel in (("all", ok), ("short", [r for r in ok if r["prompt_tokens"] < 8192]),
                      ("long", [r for r in ok if r["prompt_tokens"] >= 8192])):
        t = [1e3 * (r["first_byte"] - r["sent"]) for r in sel]
        if t:
            print(f"{tag:8s} {name:5s} n={len(t):3d} TTFT mean {statistics.mean(t):7.1f} p50 {q(t, .5):7.1f} "
                  f"p90 {q(t, .9):7.1f} p99 {q(t, .99):7.1f} max {max(t):7.1f} ms")
PY
tar czf $OUT/serve.tgz -C /tmp/res serve
