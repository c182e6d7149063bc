# Stop 49, third call: 7B nano256 beside transformers (acceptance.sh nano_7) at the 2-a-SM PDL rule, then short96 and
# short64 once each engine alone under it (s49a/s49b's shapes: short96 should now match their TACHYON_ATTN_PDL=1,
# short64 their rule). ~8 minutes on a cold machine. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s49c.sh
bash benchmarks/gpu/bench_scripts/acceptance.sh nano_7
mkdir -p $OUT/acc && mv $OUT/acceptance.tgz $OUT/acc/
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s49c
mkdir -p $R
. benchmarks/gpu/bench_scripts/engine_ab_lib.sh
synth short96 96 256 512
synth short64 64 256 512
for w in short96 short64; do
  run_alone $w rule2 TACHYON_UNUSED=1
done
tar czf $OUT/s49c.tgz -C $R --exclude short96.json --exclude short64.json .
