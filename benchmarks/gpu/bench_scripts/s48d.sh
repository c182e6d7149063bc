# PDL off for the attention launches only (TACHYON_ATTN_PDL=0; every other kernel keeps it): s48c found PDL off for
# every kernel +1.3-1.4% on long-context 7B decode (64 x 3,072 + 1,024), where stop 43 found it -0.3 to -0.4% on 7B
# nano256. Engine alone, alternating: long64 on / attn-off twice, then 7B nano256 on / attn-off twice. ~6 minutes on
# a warm machine. Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s48d.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s48d
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
python3 benchmarks/gpu/long_decode_workload.py /tmp/s48d/long64.json
run() {  # workload, tag, env...
  local w=$1 tag=$2; shift 2
  env "$@" timeout 150 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload $w \
    --warmup-max-tokens 16 --output $R/$(basename $w .json)_$tag.json 2>&1 | f | grep "^| tachyon\|Error" \
    | sed "s/^/$(basename $w .json) $tag /"
}
for i in 1 2; do
  run $R/long64.json on$i TACHYON_ATTN_PDL=1
  run $R/long64.json attn_off$i TACHYON_ATTN_PDL=0
  tar czf $OUT/s48d.tgz -C $R --exclude long64.json .
done
for i in 1 2; do
  run nano256 on$i TACHYON_ATTN_PDL=1
  run nano256 attn_off$i TACHYON_ATTN_PDL=0
  tar czf $OUT/s48d.tgz -C $R --exclude long64.json .
done
