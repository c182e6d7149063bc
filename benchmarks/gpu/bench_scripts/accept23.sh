# Session 23 (stop 30): the acceptance figures at one commit, beside transformers, with each backend in its own
# fresh process (`bench offline`'s default on a GPU since this stop), and a probe of Qwen3-0.6B bs1's slow mode in
# the old one-process form. Phases, in the order given (comma-separated):
#   startup   engine start-up with an empty Triton cache (a fresh TRITON_CACHE_DIR)
#   hf        bs1 (--repeats $BS1_REPEATS, default 3) and seed8 (--repeats 3) beside transformers
#   nano      nano256 beside transformers (static batches of 64), nvidia-smi at 100 ms beside it
#   bs1x      $BS1X more acceptance-form bs1 invocations (--repeats 5), each a new pair of processes
#   inproc    bs1 --repeats 3 in one process (--no-isolate), mixed_graph_max_tokens 1,024 / 0, alternating, twice
# Packed into $OUT/accept23_<shape>.tgz after every phase.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/accept23.sh SHAPE PHASES
#   SHAPE: qwen3-0.6b | qwen2.5-7b (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
SHAPE=$1
R=/tmp/accept23_$SHAPE
mkdir -p $R/offline $R/startup $R/bs1x $R/inproc
pack() { tar czf $OUT/accept23_$SHAPE.tgz -C $R .; }
rows() { grep "runs:\|warm-up\|^| \(hf\|tachyon\) \|Error\|error\|FAILED"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
for phase in ${2//,/ }; do
  echo "== $phase $(date +%T)" | tee -a $R/phases.txt
  case $phase in
    startup)
      TRITON_CACHE_DIR=/tmp/triton_cold_$SHAPE timeout 120 python3 benchmarks/gpu/startup.py --shape $SHAPE \
        --out $R/startup 2>&1 | f | grep "^{\|Error" | cut -c1-600 ;;
    hf)
      for w in "bs1 ${BS1_REPEATS:-3}" "seed8 3"; do
        set -- $w
        timeout 240 $B bench offline --backend hf,tachyon --model $SHAPE --dummy --workload $1 --repeats $2 \
          --output $R/offline/$1_$SHAPE.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/$SHAPE $1 /"
        pack
      done ;;
    nano)
      nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
        --format=csv -lms 100 > $R/smi.csv 2>&1 &
      SMI=$!
      timeout ${NANO_TIMEOUT:-570} $B bench offline --backend hf,tachyon --model $SHAPE --dummy --workload nano256 \
        --hf-batch-size 64 \
        --output $R/offline/nano256_$SHAPE.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/$SHAPE nano256 /"
      kill $SMI ;;
    bs1x)
      for i in $(seq 1 ${BS1X:-2}); do
        timeout 180 $B bench offline --backend hf,tachyon --model $SHAPE --dummy --workload bs1 --repeats 5 \
          --output $R/bs1x/$i.json 2>&1 | f | grep "runs:\|Error\|FAILED" | sed "s/^/bs1x $i /" | tee -a $R/bs1x/runs.txt
        pack
      done ;;
    inproc)
      i=0
      for mixed in 1024 0 1024 0; do
        i=$((i + 1))
        timeout 180 $B bench offline --backend hf,tachyon --no-isolate --model $SHAPE --dummy --workload bs1 \
          --repeats 3 --engine-arg mixed_graph_max_tokens=$mixed --output $R/inproc/${i}_$mixed.json 2>&1 | f \
          | grep "runs:\|Error\|FAILED" | sed "s/^/inproc $i mixed=$mixed /" | tee -a $R/inproc/runs.txt
        pack
      done ;;
  esac
  pack
done
echo "== done $(date +%T)" | tee -a $R/phases.txt
pack
