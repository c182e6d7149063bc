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
python3 benchmarks/gpu/long_decode_workload.py $R/short96.json --requests 96 --prompt 256 --outputs 512
python3 benchmarks/gpu/long_decode_workload.py $R/short48.json --requests 48 --prompt 512 --outputs 512
run() {  # workload, tag, env...
  local w=$1 tag=$2; shift 2
  env "$@" timeout 120 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload $R/$w.json \
    --repeats 3 --warmup-max-tokens 16 --output $R/${w}_$tag.json 2>&1 | f | grep "^| tachyon\|Error" \
    | sed "s/^/$w $tag /"
}
for i in 1 2; do
  for w in short96 short48; do
    run $w rule$i TACHYON_UNUSED=1
    run $w on$i TACHYON_ATTN_PDL=1
  done
  tar czf $OUT/s49a.tgz -C $R --exclude short96.json --exclude short48.json .
done
