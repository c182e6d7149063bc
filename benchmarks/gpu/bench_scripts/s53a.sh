# Prefix caching on against off on the acceptance workloads (engine alone, each run its own process, alternating):
# Qwen2.5-7B nano256 off/on/off/on, Qwen3-0.6B nano256 off/on. nano256
# has no shared prompt heads: this measures what the block hashing costs where nothing hits (the default stays
# off: docs/performance.md, "Prefix caching"). ~4 minutes on a warm machine; each JSON lands in $OUT as it is written.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s53a.sh
. benchmarks/gpu/bench_scripts/env.sh
run() {  # model workload prefix_caching tag [extra]
  timeout 150 $B bench offline --backend tachyon --model $1 --dummy --workload $2 --warmup-max-tokens 32 \
    --engine-arg enable_prefix_caching=$3 $5 --output $OUT/$2_$1_pc-$3_$4.json 2>&1 | f \
    | grep "runs:\|^| tachyon \|Error\|error" | sed "s/^/$1 $2 pc=$3 $4 /"
}
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
for r in 1 2; do for pc in false true; do run qwen2.5-7b nano256 $pc r$r; done; done
for pc in false true; do run qwen3-0.6b nano256 $pc r1; done
# the kernel benchmark after its split into modules (stop 53): one kernel at real sizes
(cd benchmarks/kernels && timeout 90 python3 run_all.py --only penalties --out $OUT/kernels 2>&1 | f | tail -6)
