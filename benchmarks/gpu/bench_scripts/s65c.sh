# Stop 65. On an H200: #3's acceptance steps (STEPS, default bs1_06; acceptance.sh, through s64b.sh). On any other
# card: the engine now hands a launched step's tokens out before running a synchronous step after it (a long prompt's
# chunk), where it held them for that whole step. s64b.sh's server run again (all 256 nano256 requests at 4 a second,
# every 8th prompt 8,192 tokens, through `tachyon serve` at its defaults, access lines kept; serve.tgz), then the
# engine alone on stop 65's server arrivals with arrivals_probe.py, whose TTFT now runs to the step call that returns
# the first token (min_tokens = max_tokens, as `bench serve` sends; cap 512; arrivals.tgz). ~4 min on an H100.
# Needs .tok and .whl_serve carried with .whl (s60c.sh's header says how they are made).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> [STEPS=...] bash benchmarks/gpu/bench_scripts/s65c.sh
bash benchmarks/gpu/bench_scripts/s64b.sh
grep -q H200 $OUT/gpu.txt && exit
source benchmarks/gpu/bench_scripts/env.sh
LOG=benchmarks/results/session54/s64b_serve/serve_cap.requests.jsonl.gz
timeout 200 python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --num 256 --long-every 8 --long-len 8192 \
  --engine-arg max_model_len=16384 --engine-arg long_prefill_token_threshold=512 --engine-arg scheduling_policy=fcfs \
  --arrivals-from $LOG --min-tokens --tag delivered_lp512_min --out /tmp/res/arrivals 2>&1 | f | tail -1 \
  | tee -a $OUT/arrivals.txt
tar czf $OUT/arrivals.tgz -C /tmp/res arrivals
