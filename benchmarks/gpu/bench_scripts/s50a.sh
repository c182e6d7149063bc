# Stop 50, first call: logit_bias and structured outputs (JSON schema, regex, choice) through graphed Qwen2.5-7B steps
# (dummy weights, the default model's tokenizer: carry .gpu_tok, its tokenizer.json / tokenizer_config.json), checked
# and timed against plain rows at batch 1, 16 and 64; then Qwen3-0.6B bs1 beside transformers (acceptance.sh bs1_06).
# ~5 minutes on a cold machine. Usage (device, repo root; carry .whl and .gpu_tok):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s50a.sh
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/constrained
timeout 300 python3 benchmarks/gpu/constrained_decode.py --tokenizer .gpu_tok --out $OUT/constrained 2>&1 \
  | grep -v -i warn | tee $OUT/constrained/log.txt | tail -40
echo "constrained rc ${PIPESTATUS[0]}"
bash benchmarks/gpu/bench_scripts/acceptance.sh bs1_06
mkdir -p $OUT/acc && mv $OUT/acceptance.tgz $OUT/acc/
