# What a faster replay buys at the power cap: 7B nano256 engine alone with PDL (the default) against TACHYON_PDL=0,
# alternating (stop 43: PDL takes 1.3 ms, 11%, off a flat-shaped step's replay). ~3 minutes on a warm machine.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s37e.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s37e
mkdir -p $R
run() {  # tag, TACHYON_PDL
  TACHYON_PDL=$2 timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
    --output $R/nano256_$1.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$1 /"
}
run pdl1 1; run pdl0 0; run pdl1b 1; run pdl0b 0
tar czf $OUT/s37e.tgz -C $R .
