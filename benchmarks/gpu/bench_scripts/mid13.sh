# Session 13, first call: (1) the mid-batch GEMM sweep (gemm_mid_sweep.py: cuBLAS against the skinny GEMM with
# the rows as one 16-256 block, Qwen2.5-7B projections and lm_head); (2) Qwen2.5-7B nano256 with the default
# decode-graph buckets against finer ones (TACHYON_DECODE_BUCKETS: every 16 rows above 64, every 8 above 32),
# alternating, nvidia-smi every 100 ms beside them. Results packed into $OUT/mid13.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/mid13.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/mid13
mkdir -p $R/smoke $R/sweep
pack() { tar czf $OUT/mid13.tgz -C $R .; }
timeout ${SWEEP_S:-240} python3 benchmarks/kernels/gemm_mid_sweep.py --out $R/sweep ${SWEEP_ARGS:-} 2>&1 | grep -v -i warn \
  | tee $R/sweep.txt
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
S16="1,2,4,8,16,24,32,48,64,80,96,112,128,144,160,176,192,208,224,240,256,320,384,448,512"
S8="1,2,4,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128,136,144,152,160,168,176,184,192,200,208,216,224,232,240,248,256,320,384,448,512"
for v in default s16 s8 default s16; do
  case $v in default) unset TACHYON_DECODE_BUCKETS;; s16) export TACHYON_DECODE_BUCKETS=$S16;; s8) export TACHYON_DECODE_BUCKETS=$S8;; esac
  date +%T.%N >> $R/order.txt
  timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads nano256 --tag _$v --out $R/smoke \
    2>&1 | f | grep -v "^{" | tail -1 | sed "s/^/$v /" | tee -a $R/order.txt
  pack
done
kill $SMI
pack
