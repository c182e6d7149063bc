# Session 13, after the closing call: Qwen3-0.6B bs1 in the acceptance configuration (tachyon bench offline) gave
# 1,452.9 tok/s beside transformers while the engine run of the same call gave 1,531.5. Again, alternating the head
# with stop 18's decode buckets and without this stop's cuBLASLt picks and last-layer pruning ("old"), and once
# without transformers in the process. Packed into $OUT/bs1check13.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/bs1check13.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/bs1check13
mkdir -p $R
pack() { tar czf $OUT/bs1check13.tgz -C $R .; }
OLDB="1,2,4,8,16,24,32,48,64,96,128,160,192,224,256,320,384,448,512"
# ROUND=2: which of the three settings it is, without transformers in the process
[ "${ROUND:-1}" = 2 ] && V="head:tachyon oldbuckets:tachyon nolt:tachyon head:tachyon old:tachyon" \
  || V="head:tachyon head:hf,tachyon old:hf,tachyon head:hf,tachyon old:tachyon head:tachyon"
for v in $V; do
  name=${v%%:*}; be=${v#*:}
  unset TACHYON_DECODE_BUCKETS TACHYON_BLAS_PICK TACHYON_PRUNE_LAST_LAYER
  [ $name = old ] && export TACHYON_DECODE_BUCKETS=$OLDB TACHYON_BLAS_PICK=0 TACHYON_PRUNE_LAST_LAYER=0
  [ $name = oldbuckets ] && export TACHYON_DECODE_BUCKETS=$OLDB
  [ $name = nolt ] && export TACHYON_BLAS_PICK=0
  echo "$(date +%T) $name $be" >> $R/order.txt
  timeout 80 $B bench offline --backend $be --model qwen3-0.6b --dummy --workload bs1 \
    --output $R/bs1_${name}_${be/,/_}_$(date +%s).json 2>&1 | f | grep "^| tachyon " | head -1 | sed "s/^/$name $be /" \
    | tee -a $R/order.txt
  pack
done
