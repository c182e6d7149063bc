# Next call after session 22: does the 120-graph mixed-step capture (stop 28) decide Qwen3-0.6B bs1's mode in the
# acceptance's form? Session 22's transformers-first process ran slow (1,486.1 tok/s, TPOT 0.669 ms), where
# stops 24-25's were fast. Alternating processes, `bench offline --backend hf,tachyon --workload bs1 --repeats 3`
# at mixed_graph_max_tokens 1,024 (the default) and 0, three each, then the engine alone at both. The step's TPOT
# tells the mode (fast 0.653-0.657 ms, slow 0.664-0.670). Packed into $OUT/mode22.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/mode22.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/mode22
mkdir -p $R/offline
pack() { tar czf $OUT/mode22.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
i=0
for run in "hf,tachyon 1024" "hf,tachyon 0" "hf,tachyon 1024" "hf,tachyon 0" "hf,tachyon 1024" "hf,tachyon 0" \
           "tachyon 1024" "tachyon 0"; do
  set -- $run
  i=$((i + 1))
  timeout 120 $B bench offline --backend $1 --model qwen3-0.6b --dummy --workload bs1 --repeats 3 \
    --engine-arg mixed_graph_max_tokens=$2 --output $R/offline/${i}_$2.json 2>&1 | f \
    | grep "\[tachyon\] 3 runs\|^| tachyon \|Error" | sed "s/^/$i $1 mixed=$2 /" | tee -a $R/mode.txt
  pack
done
