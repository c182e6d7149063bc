# Session 13, second call: (1) the kept-rows check on both shapes (kept_rows_check.py); (2) Qwen2.5-7B nano256:
# the head ("all": finer buckets, last layer on the sampling rows, mixed steps launched) against each change off
# (TACHYON_LAUNCH_MIXED=0, TACHYON_PRUNE_LAST_LAYER=0) and all three off ("old": stop 18's engine), alternating,
# nvidia-smi every 100 ms beside them; (3) Qwen3-0.6B nano256 head against old. Packed into $OUT/mixed13.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/mixed13.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/mixed13
mkdir -p $R/smoke
pack() { tar czf $OUT/mixed13.tgz -C $R .; }
timeout 150 python3 benchmarks/gpu/kept_rows_check.py 2>&1 | grep -v -i warn | tee $R/kept_rows_check.txt
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
OLDB="1,2,4,8,16,24,32,48,64,96,128,160,192,224,256,320,384,448,512"
run() {  # variant shape
  unset TACHYON_LAUNCH_MIXED TACHYON_PRUNE_LAST_LAYER TACHYON_DECODE_BUCKETS
  case $1 in
    nomixed) export TACHYON_LAUNCH_MIXED=0;;
    noprune) export TACHYON_PRUNE_LAST_LAYER=0;;
    old) export TACHYON_LAUNCH_MIXED=0 TACHYON_PRUNE_LAST_LAYER=0 TACHYON_DECODE_BUCKETS=$OLDB;;
  esac
  echo "$(date +%T.%N) $1 $2" >> $R/order.txt
  timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes $2 --workloads nano256 --tag _$1 --out $R/smoke \
    2>&1 | f | grep -v "^{" | tail -1 | sed "s/^/$1 /" | tee -a $R/order.txt
  pack
}
for v in all old nomixed noprune all old; do run $v qwen2.5-7b; done
for v in all old all old; do run $v qwen3-0.6b; done
kill $SMI
pack
