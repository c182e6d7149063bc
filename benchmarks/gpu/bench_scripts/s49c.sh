# Stop 49, third call: 7B nano256 beside transformers (acceptance.sh nano_7) at the 2-a-SM PDL rule, then short96 and
# short64 once each engine alone under it (s49a/s49b's shapes: short96 should now match their TACHYON_ATTN_PDL=1,
# short64 their rule). ~8 minutes on a cold machine. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s49c.sh
bash benchmarks/gpu/bench_scripts/acceptance.sh nano_7
mkdir -p $OUT/acc && mv $OUT/acceptance.tgz $OUT/acc/
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s49c
mkdir -p $R
python3 benchmarks/gpu/long_decode_workload.py $R/short96.json --requests 96 --prompt 256 --outputs 512
python3 benchmarks/gpu/long_decode_workload.py $R/short64.json --requests 64 --prompt 256 --outputs 512
for w in short96 short64; do
  timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload $R/$w.json --repeats 3 \
    --warmup-max-tokens 16 --output $R/${w}_rule2.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$w rule2 /"
done
tar czf $OUT/s49c.tgz -C $R --exclude short96.json --exclude short64.json .
