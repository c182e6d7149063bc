# Engine-alone A/B helpers on synthetic decode workloads (long_decode_workload.py). Source after env.sh with R set to
# the results folder:
#   synth NAME REQUESTS PROMPT OUTPUTS   writes $R/NAME.json
#   run_alone NAME TAG [VAR=value ...]   Qwen2.5-7B, engine alone, --repeats 3 (the median repeat reported), under
#                                        the given environment; writes $R/NAME_TAG.json and prints its row
#   pdl_rounds PACK NAME...              twice: each workload under the default rule (tag ruleI) then
#                                        TACHYON_ATTN_PDL=1 (onI); packs $R into $OUT/PACK.tgz after each round
synth() {
  python3 benchmarks/gpu/long_decode_workload.py $R/$1.json --requests $2 --prompt $3 --outputs $4
}
run_alone() {
  local w=$1 tag=$2; shift 2
  env "$@" timeout 120 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload $R/$w.json \
    --repeats 3 --warmup-max-tokens 16 --output $R/${w}_$tag.json 2>&1 | f | grep "^| tachyon\|Error" \
    | sed "s/^/$w $tag /"
}
pdl_rounds() {
  local pack=$1; shift
  local ex="" w i
  for w in "$@"; do ex="$ex --exclude $w.json"; done
  for i in 1 2; do
    for w in "$@"; do
      run_alone $w rule$i TACHYON_UNUSED=1
      run_alone $w on$i TACHYON_ATTN_PDL=1
    done
    tar czf $OUT/$pack.tgz -C $R $ex .
  done
}
