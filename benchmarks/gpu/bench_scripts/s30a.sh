# Session 30 (stop 37), first call: where a graphed mixed step's extra time goes on Qwen2.5-7B (mixed_cost.py):
# the default process with a kernel profile, one with the chunks' attention left out of every graph, and one with
# PDL off (kernel times then do not overlap). Packed into $OUT/s30a.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s30a.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s30a
mkdir -p $R
pack() { tar czf $OUT/s30a.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
M="python3 benchmarks/gpu/mixed_cost.py --out $R --shape qwen2.5-7b ${STEPS:+--steps $STEPS}"
timeout 170 $M --tag default --profile > $R/default.log 2>&1; grep "^default\|Error" $R/default.log; pack
TACHYON_MIXED_COST_SKIP_CHUNK=1 timeout 150 $M --tag skipchunk > $R/skip.log 2>&1; grep "^skipchunk\|Error" $R/skip.log; pack
TACHYON_PDL=0 timeout 170 $M --tag nopdl --profile > $R/nopdl.log 2>&1; grep "^nopdl\|Error" $R/nopdl.log; pack
