# For the next stop's first call (one fresh machine, ~8 minutes): is TACHYON_DECODE_ORDER=lpt (the decode graphs'
# sequences longest first, every program of a sequence together, in both decode kernels) worth making the default?
# (1) mixed_attn_tiles.py: `decode_lpt` against `decode_only` per layer on three flat-shaped 7B steps' decodes;
# (2) 7B nano256 engine alone under fcfs (every decode step a decode graph), batch / lpt alternating;
# (3) the same under flat (only the decode-only tail); (4) the GPU kernel tests.
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/offline
timeout 100 python3 benchmarks/gpu/mixed_attn_tiles.py --tiles "" --out $OUT 2>&1 | f | tail -16
run() {  # tag, order, policy
  TACHYON_DECODE_ORDER=$2 timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
    --engine-arg scheduling_policy=$3 --output $OUT/offline/nano256_$1.json 2>&1 | f | grep "^| tachyon\|Error" \
    | sed "s/^/$1 /"
}
run fcfs_batch batch fcfs; run fcfs_lpt lpt fcfs; run fcfs_batch2 batch fcfs; run fcfs_lpt2 lpt fcfs
run flat_batch batch flat; run flat_lpt lpt flat
timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -3
