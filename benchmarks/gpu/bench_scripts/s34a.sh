# For the next stop's first call (one fresh machine, ~7 minutes): is TACHYON_MIXED_ORDER=lpt (the mixed step's decode
# sequences longest first, heads-fastest dispatch) worth making the default? (1) mixed_attn_tiles.py: `lpt` against
# `default` per layer on three flat-shaped 7B steps; (2) mixed_check.py on 7B under lpt: every mixed step form's graph
# replays its padded eager step; (3) 7B nano256 engine alone, batch / lpt alternating; (4) the GPU kernel tests.
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/offline
timeout 100 python3 benchmarks/gpu/mixed_attn_tiles.py --tiles 128:64:4:2 --out $OUT 2>&1 | f | tail -20
TACHYON_MIXED_ORDER=lpt timeout 120 python3 benchmarks/gpu/mixed_check.py --shapes qwen2.5-7b \
  --steps 200:40+48,144:88,250:300~70 --out $OUT/check_lpt 2>&1 | f | tail -8
run() {  # tag, order
  TACHYON_MIXED_ORDER=$2 timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
    --output $OUT/offline/nano256_$1.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$1 /"
}
run batch batch; run lpt lpt; run batch2 batch; run lpt2 lpt
timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -3
