# Stop 50, second call (and third, constrained part only, after mask_logits sets ended rows' EOS bits on the host): constrained_decode.py again after the sampler batches its logit_bias / penalty / min_tokens
# rows (one index_add / one mask each instead of a few small copies and kernels a row), with penalty rows and the
# sampler's own cost per kind of row (sampler_costs); then Qwen2.5-7B bs1 and seed8 beside transformers
# (acceptance.sh hf_7). ~5 minutes on a warm machine. Usage (device, repo root; carry .whl and .gpu_tok):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s50b.sh
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/constrained
timeout 300 python3 benchmarks/gpu/constrained_decode.py --tokenizer .gpu_tok --out $OUT/constrained 2>&1 \
  | grep -v -i warn | tee $OUT/constrained/log.txt | tail -40
echo "constrained rc ${PIPESTATUS[0]}"
bash benchmarks/gpu/bench_scripts/acceptance.sh hf_7
mkdir -p $OUT/acc && mv $OUT/acceptance.tgz $OUT/acc/
