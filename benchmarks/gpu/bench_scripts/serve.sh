# One H200 call: `tachyon serve` on the Qwen2.5-7B dummy shape and the serving sweep / SLO max-rate search.
# Needs .tok: the SmolLM2 tokenizer directory (gitignored, so pass it in `carry` with .whl).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/serve.sh
. benchmarks/gpu/bench_scripts/env.sh
python3 -m tachyon.serving --model qwen2.5-7b --load-format dummy --tokenizer .tok \
  --served-model-name qwen2.5-7b-dummy --port 8000 > /tmp/res/server.log 2>&1 &
SPID=$!
wait_healthy
timeout 420 $B bench serve --base-url http://127.0.0.1:8000 --model qwen2.5-7b-dummy --dataset random --input-len 256 --output-len 128 --vocab-size 49152 --num-prompts 32 --sweep --sweep-mode concurrency --sweep-values 1,8,32,128 --slo interactive --find-max-rate --start-rate 4 --max-probes 7 --rate-tol 0.2 --probe-duration 15 --exact-chunk-tokens --capacity 100 --output /tmp/res/serve_qwen2.5-7b.json --report-dir /tmp/res --no-progress 2>&1
kill $SPID; sleep 2
grep -v tachyon.serving.access /tmp/res/server.log | tail -5
tar czf $OUT/serve.tgz -C /tmp res
