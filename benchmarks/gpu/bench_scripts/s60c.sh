# Stop 60. On an H200: #3's acceptance steps (STEPS, default bs1_06,nano_7; acceptance.sh). On any other card: the
# server's new long_prefill_token_threshold default (a quarter of the 2,048-token budget: 512) against 0, through
# HTTP: `tachyon serve` on the Qwen2.5-7B dummy shape, 160 random prompts of 205-3,891 tokens (uniform) with 128
# outputs, Poisson arrivals at 4 a second (`bench serve`); each setting its own server, default first. ~4 min.
# Needs .tok (a tokenizer directory) and .whl_serve (fastapi, uvicorn, limits, prometheus-client, httpx, rich and
# their wheels) carried with .whl; both git-excluded. Made on the CPU machine with:
#   python -c "from transformers import AutoTokenizer as A; from tachyon.models.default import default_model_path as d;
#     import os; p = d(); A.from_pretrained(os.path.dirname(p), gguf_file=os.path.basename(p)).save_pretrained('.tok')"
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64
#     -d .whl_serve fastapi uvicorn limits prometheus-client httpx rich  (then drop what .whl already holds)
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s60c.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-bs1_06,nano_7}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl_serve/*.whl || exit 1
for flag in "" "--long-prefill-token-threshold 0"; do
  tag=${flag:+lp0}; tag=${tag:-default}
  python3 -m tachyon.serving --model qwen2.5-7b --load-format dummy --tokenizer .tok \
    --served-model-name qwen2.5-7b-dummy --port 8000 $flag > /tmp/res/server_$tag.log 2>&1 &
  SPID=$!
  wait_healthy
  timeout 200 $B bench serve --base-url http://127.0.0.1:8000 --model qwen2.5-7b-dummy --dataset random \
    --input-len 2048 --len-dist uniform --len-ratio 0.9 --output-len 128 --vocab-size 49152 --num-prompts 160 \
    --process poisson --rate 4 --exact-chunk-tokens --output $OUT/serve_$tag.json --no-progress 2>&1 \
    | tail -25 | tee $OUT/serve_$tag.txt
  kill $SPID; wait $SPID 2>/dev/null
  grep -v tachyon.serving.access /tmp/res/server_$tag.log | grep -i "error\|traceback\|ready" | tail -4
done
