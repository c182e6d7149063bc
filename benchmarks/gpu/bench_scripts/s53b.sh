# Stop 53's last device minutes: (1) the kernel benchmark after its split into modules (all kernels, real sizes,
# ~45 s); (2) prefix caching on against off, Qwen2.5-7B nano256, engine alone, one round (nothing hits there: the
# hashing's cost for a user who turns it on). Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s53b.sh
. benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
(cd benchmarks/kernels && timeout 120 python3 run_all.py --out $OUT/kernels 2>&1 | f | tail -40)
for pc in false true; do
  timeout 120 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 --warmup-max-tokens 32 \
    --engine-arg enable_prefix_caching=$pc --output $OUT/nano256_qwen2.5-7b_pc-$pc.json 2>&1 | f \
    | grep "^| tachyon \|Error\|error" | sed "s/^/7b nano256 pc=$pc /"
done
