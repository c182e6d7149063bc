# Next call after session 23: which change since stop 28 put Qwen3-0.6B bs1 in the slow mode? Stop 28's engine-only
# processes were fast (e5014af: 1,513.4-1,514.8 tok/s, TPOT ~0.655 ms); every process since has been slow (a5e793a's
# one acceptance process; ten at 2466f60-68f4856 on session 23's machines, TPOT 0.668-0.669). Between them: the
# StepGraphs refactor (7db7046, 36c51ba; no device allocation changed by reading) and, from session 22's end, the
# 16,384-token offline step budget (bigger prefill buffers: another start-up layout). Engine-only bs1 --repeats 5,
# alternating: HEAD at its default budget, HEAD at 8,192, a5e793a (refactor, 8,192), e5014af (stop 28). Twice.
# Phases (comma-separated, default bisect):
#   bisect   the trees and budgets above (~6 min)
#   kvsweep  HEAD at gpu_memory_utilization 0.90 ... 0.85 and 0.90 again: the KV cache's size moves every later
#            allocation and each layer's K / V stride; does the mode follow it? (~5 min)
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/mode24.sh [PHASES] (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/mode24
mkdir -p $R
pack() { tar czf $OUT/mode24.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader | tee $R/gpu.txt
for sha in e5014af a5e793a; do
  mkdir -p /tmp/wt_$sha && git archive $sha | tar -x -C /tmp/wt_$sha || echo "no tree for $sha"
done
one() {  # label, tree, sha, extra bench args
  (cd $2 && PYTHONPATH=/tmp/site:$2 TACHYON_GIT_SHA=$3 timeout 100 python3 benchmarks/gpu/bench_scripts/bench.py \
    bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 5 $4 \
    --output $R/$1.json) 2>&1 | f | grep "runs:\|Error" | sed "s/^/$1 /" | tee -a $R/runs.txt
  pack
}
for phase in $(echo ${1:-bisect} | tr , ' '); do
  echo "== $phase $(date +%T)" | tee -a $R/runs.txt
  case $phase in
    bisect)
      for i in 1 2; do
        one head_${i} $PWD $TACHYON_GIT_SHA ""
        one head8k_${i} $PWD $TACHYON_GIT_SHA "--engine-arg max_num_batched_tokens=8192"
        one a5e793a_${i} /tmp/wt_a5e793a a5e793a ""
        one e5014af_${i} /tmp/wt_e5014af e5014af ""
      done ;;
    kvsweep)
      i=0
      for u in 0.90 0.89 0.88 0.87 0.86 0.85 0.90; do
        i=$((i + 1))
        one kv${i}_$u $PWD $TACHYON_GIT_SHA "--engine-arg gpu_memory_utilization=$u"
      done ;;
  esac
done
