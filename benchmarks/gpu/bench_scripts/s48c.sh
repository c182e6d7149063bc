# Does programmatic dependent launch (PDL) cost a long-context decode step what it costs back-to-back attention
# launches that fit in one wave (decode_loop_variants.py: 64 x 4,096 keys 168.3 µs a launch with PDL, 129.3
# without)? 7B, 64 requests of 3,072 prompt tokens and 1,024 outputs (decode steps of 64 sequences at 3-4K keys),
# engine alone, alternating TACHYON_PDL=1 / 0 processes: TPOT and output tok/s. ~3 minutes on a warm machine.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s48c.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s48c
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
python3 benchmarks/gpu/long_decode_workload.py /tmp/s48c/long64.json
run() {  # tag, env...
  local tag=$1; shift
  env "$@" timeout 150 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload $R/long64.json \
    --warmup-max-tokens 16 --output $R/long64_$tag.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$tag /"
}
for i in 1 2; do
  run pdl$i TACHYON_PDL=1
  run nopdl$i TACHYON_PDL=0
  tar czf $OUT/s48c.tgz -C $R --exclude long64.json .
done
