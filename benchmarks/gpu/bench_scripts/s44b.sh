# Does filling flat's steps to multiples of 128 rows pay? (~6.5 minutes on a warm machine.) First the engine's own
# mixed graphs held at the power cap for keys of 128 and 192 decode rows beside chunks that total 224-448 rows
# (step_energy.py --pieces step, the key list twice so keys alternate): does a step's cost rise in stairs between
# multiples of 128 rows, as the bare GEMM chain's does? Then 7B nano256, engine alone, alternating:
#   base   the committed engine: chunk buckets every 64 rows, fill to 288 rows
#   q128   chunk buckets every 32 rows to 512, fill to multiples of 128 rows that average 288 (TACHYON_FLAT_QUANTUM)
#   q128r  the same averaging 300 rows (fewer steps in the tail in scheduler simulation)
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s44b.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s44b
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
K=128:96,128:128,128:160,128:192,128:224,128:256,128:288,128:320,192:32,192:64,192:96,192:128,192:160,192:192,192:224,192:256
timeout 150 python3 benchmarks/gpu/step_energy.py --out $R --tag _keys --pieces step --rounds 1 --seconds 1.0 \
  --steps $K,$K > $R/keys.log 2>&1; grep -v '^{' $R/keys.log | f | grep -v "^frame" | cut -c1-160 | tail -34
tar czf $OUT/s44b.tgz -C $R .
OLD=64,128,192,256,320,384,448,512,640,768,896,1024
run() {  # tag, env...
  local tag=$1; shift
  env "$@" timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
    --output $R/nano256_$tag.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$tag /"
}
for i in 1 2; do
  run base$i TACHYON_MIXED_CHUNK_BUCKETS=$OLD
  run q128_$i TACHYON_FLAT_QUANTUM=128
  run q128r$i TACHYON_FLAT_QUANTUM=128 TACHYON_FLAT_ROWS=300
  tar czf $OUT/s44b.tgz -C $R .
done
