# Stop 49, second call: s49a found the one-wave rule -0.3% on short96 (96 x 256 + 512: 384 programs, 2.9 a SM) and
# +0.5% on short48 (192 programs). Is it the program count or the short contexts? TACHYON_ATTN_PDL=1 here is what a
# threshold of 2 programs a SM would do to these workloads' decode steps. Engine alone, --repeats 3 a process,
# alternating the rule and TACHYON_ATTN_PDL=1 twice on long96 (96 x 2,048 + 512: 384 programs over 2-2.5K keys) and
# short64 (64 x 256 + 512: 256 programs). ~5 minutes on a cold machine. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s49b.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s49b
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
. benchmarks/gpu/bench_scripts/engine_ab_lib.sh
synth long96 96 2048 512
synth short64 64 256 512
pdl_rounds s49b long96 short64
