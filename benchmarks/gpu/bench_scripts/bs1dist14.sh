# Session 14, third call: the spread of Qwen3-0.6B bs1 in the acceptance configuration (tachyon bench offline, one
# process per run), the default 64-key decode tiles against 32-key tiles at batch 1 (TACHYON_DECODE_TILE=32:4:2, an
# A/B knob of the dedicated decode kernel's split launches), alternating, eight runs each. The second call's plain
# runs gave 1,487.4 / 1,489.1 / 1,514.1 tok/s, so the figure sits on the 1,500 target. Packed into
# $OUT/bs1dist14.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/bs1dist14.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/bs1dist14
mkdir -p $R
pack() { tar czf $OUT/bs1dist14.tgz -C $R .; }
for round in 1 2 3 4 5 6 7 8; do
  for v in default tile32; do
    unset TACHYON_DECODE_TILE
    [ $v = tile32 ] && export TACHYON_DECODE_TILE=32:4:2
    timeout 60 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 \
      --output $R/bs1_${v}_r$round.json 2>&1 | f | grep "^| tachyon " | head -1 | sed "s/^/$(date +%T) $v r$round /" \
      | tee -a $R/order.txt
    pack
  done
done
