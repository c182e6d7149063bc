# The one-wave rule (attention_config.attention_pdl: an unsplit decode launch of <= 3 programs a SM launches without
# PDL) checked where it could cost: Qwen3-0.6B bs1 beside transformers (acceptance.sh bs1_06: the start-up layout
# mode the new compiled variant could move), then long64 (64 x 3,072 + 1,024, 7B) engine alone, the rule against
# TACHYON_ATTN_PDL=1. ~4 minutes on a warm machine.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s48e.sh
bash benchmarks/gpu/bench_scripts/acceptance.sh bs1_06
mkdir -p $OUT/acc && mv $OUT/acceptance.tgz $OUT/acc/
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s48e
mkdir -p $R
python3 benchmarks/gpu/long_decode_workload.py /tmp/s48e/long64.json
run() {  # tag, env...
  local tag=$1; shift
  env "$@" timeout 150 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload $R/long64.json \
    --warmup-max-tokens 16 --output $R/long64_$tag.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/long64 $tag /"
}
run rule1 TACHYON_UNUSED=1
run on1 TACHYON_ATTN_PDL=1
tar czf $OUT/s48e.tgz -C $R --exclude long64.json .
