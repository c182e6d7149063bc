# Stop 49, first call: the acceptance's start-up (the machine's first process) and GPU kernel tests at HEAD (after the
# one-wave PDL rule, e2a9dc8), then the rule where stop 48 left it unmeasured: short-context 7B decode at 33-99
# sequences (unsplit launches of <= 3 programs a SM, now without PDL). Engine alone, --repeats 3 a process,
# alternating the rule and TACHYON_ATTN_PDL=1 twice on short96 (96 x 256 + 512) and short48 (48 x 512 + 512).
# ~6 minutes on a cold machine. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s49a.sh
bash benchmarks/gpu/bench_scripts/acceptance.sh startup,tests
mkdir -p $OUT/acc && mv $OUT/acceptance.tgz $OUT/acc/
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s49a
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
. benchmarks/gpu/bench_scripts/engine_ab_lib.sh
synth short96 96 256 512
synth short48 48 512 512
pdl_rounds s49a short96 short48
