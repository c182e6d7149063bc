# Session 19: the offline LLM's default step budget. `tachyon bench offline --backend tachyon --workload nano256`
# at max_num_batched_tokens 8,192 (the new offline default) and 16,384 (vLLM's LLM-class default on H100-class
# GPUs), alternating processes, two timed runs per load. Packed into $OUT/budget19.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/budget19.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/budget19
mkdir -p $R/offline
pack() { tar czf $OUT/budget19.tgz -C $R .; }
i=0
for run in "qwen3-0.6b 8192" "qwen3-0.6b 16384" "qwen3-0.6b 8192" "qwen3-0.6b 16384" \
           "qwen2.5-7b 8192" "qwen2.5-7b 16384"; do
  set -- $run
  i=$((i + 1))
  timeout 120 $B bench offline --backend tachyon --model $1 --dummy --workload nano256 --repeats 2 \
    --engine-arg max_num_batched_tokens=$2 --output $R/offline/${i}_$1_$2.json 2>&1 | f | grep "runs:" \
    | sed "s/^/$i $1 $2 /" | tee -a $R/budget.txt
  pack
done
