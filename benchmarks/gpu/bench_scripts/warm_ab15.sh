# Session 15 (stop 21): does the bench's new full-length warm-up slow Qwen3-0.6B bs1? accept15 gave 1,483.9-1,486.1
# tok/s in all five runs after a full-length warm-up, against 1,516.8-1,519.5 after the old 4-token warm-up in the
# call before (another machine). Alternating processes on one machine, three rounds: `bench offline --repeats 3` with
# the full-length warm-up, with --warmup-max-tokens 4 (the old one), and with --no-warmup (the engine's own start-up
# warm-up only). Packed into $OUT/warm_ab15.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/warm_ab15.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/warm_ab15
mkdir -p $R
pack() { tar czf $OUT/warm_ab15.tgz -C $R .; }
for round in 1 2 3; do
  for v in full w4 none; do
    case $v in full) flag="" ;; w4) flag="--warmup-max-tokens 4" ;; none) flag="--no-warmup" ;; esac
    timeout 80 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 3 $flag \
      --output $R/bs1_${v}_r$round.json 2>&1 | f | grep "runs:" | sed "s/^/$v r$round /" | tee -a $R/order.txt
    pack
  done
done
