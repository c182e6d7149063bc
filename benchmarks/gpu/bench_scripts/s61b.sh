# Stop 61. On an H200: #3's acceptance steps (STEPS, default nano_7,bs1_06; acceptance.sh). On any other card: the
# long-prefill cap's rule through HTTP: `tachyon serve` on the Qwen2.5-7B dummy shape with the default cap (512) under
# the shorter-waiter rule (the default since stop 61), under the any-waiter rule (TACHYON_LONG_PREFILL_RULE=any,
# stop 60's), and with the cap off; 160 random prompts of 205-3,891 tokens (uniform), 128 outputs, Poisson arrivals
# at 4 a second (`bench serve`, as s60c.sh); each setting its own server. ~4 min. Results come back packed in
# serve.tgz (at 18aca47 they were written to $OUT one by one, and the 8-file limit dropped the first setting's log).
# Needs .tok and .whl_serve carried with .whl (s60c.sh's header says how they are made).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s61b.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh ${STEPS:-nano_7,bs1_06}
  exit
fi
source benchmarks/gpu/bench_scripts/env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl_serve/*.whl || exit 1
mkdir -p /tmp/res/serve  # packed into $OUT/serve.tgz: a call returns at most 8 files
for tag in shorter any lp0; do
  flag=""; rule=shorter
  [ $tag = any ] && rule=any
  [ $tag = lp0 ] && flag="--long-prefill-token-threshold 0"
  TACHYON_LONG_PREFILL_RULE=$rule python3 -m tachyon.serving --model qwen2.5-7b --load-format dummy --tokenizer .tok \
    --served-model-name qwen2.5-7b-dummy --port 8000 $flag > /tmp/res/server_$tag.log 2>&1 &
  SPID=$!
  wait_healthy
  timeout 200 $B bench serve --base-url http://127.0.0.1:8000 --model qwen2.5-7b-dummy --dataset random \
    --input-len 2048 --len-dist uniform --len-ratio 0.9 --output-len 128 --vocab-size 49152 --num-prompts 160 \
    --process poisson --rate 4 --exact-chunk-tokens --output /tmp/res/serve/serve_$tag.json --no-progress 2>&1 \
    | tail -4 | tee /tmp/res/serve/serve_$tag.txt
  kill $SPID; wait $SPID 2>/dev/null
  grep -v tachyon.serving.access /tmp/res/server_$tag.log | grep -i "error\|traceback" | tail -4
  tar czf $OUT/serve.tgz -C /tmp/res serve
done
