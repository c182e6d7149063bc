# Does the mixed attention's decode part lose to its occupancy? The one-launch kernel takes 255 registers (the chunk
# programs' 128-row tile), so 2 programs a SM, against the decode kernel's 3 (168 registers) or 5 (64-key tiles, 94).
# First mixed_attn_tiles.py on flat-shaped 7B steps: decode tiles 128 / 64 / 32, each with the shipped chunk tile and
# 64:32:4:2 (150 registers with a 64-key decode tile: 3 programs a SM), the decode kernel alone (longest first) and the
# chunks' launch on a side stream beside it (`fork`). Then, if an lpt variant beats the shipped one by >= 2% over the
# three steps, 7B nano256 engine alone, alternating base / that variant (TACHYON_MIXED_DECODE_TILE,
# TACHYON_MIXED_CHUNK_TILE), nvidia-smi at 100 ms beside it. ~5-7 minutes on a warm machine.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s48a.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s48a
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
timeout 200 python3 benchmarks/gpu/mixed_attn_tiles.py --out $R --tiles 64:32:4:2 --decode-tiles 128,64,32 \
  > $R/tiles.log 2>&1; grep -v -i warn $R/tiles.log | cut -c1-200 | tail -60
tar czf $OUT/s48a.tgz -C $R .
PICK=$(python3 - <<'PY'
import json
rows = json.load(open("/tmp/s48a/mixed_attn_tiles.json"))["results"]
tot = {}
for r in rows:
    for k, v in r["forms"].items():
        if k.startswith("lpt@") and "us" in v:
            tot[k] = tot.get(k, 0) + v["us"]
tot = {k: v for k, v in tot.items() if len([r for r in rows if k in r["forms"] and "us" in r["forms"][k]]) == len(rows)}
base = tot.get("lpt@128")
best = min(tot, key=tot.get) if tot else None
if base and best and tot[best] <= 0.98 * base:
    bn, _, tile = best[4:].partition("/")
    print(f"TACHYON_MIXED_DECODE_TILE={bn}" + (f" TACHYON_MIXED_CHUNK_TILE={tile}" if tile else ""))
PY
)
echo "pick: ${PICK:-none}" | tee $R/pick.txt
[ -z "$PICK" ] && exit 0
run() {  # tag, env...
  local tag=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
    --format=csv -lms 100 > $R/smi_$tag.csv 2>&1 &
  local smi=$!
  env "$@" timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
    --output $R/nano256_$tag.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$tag /"
  kill $smi
}
for i in 1 2; do
  run base$i TACHYON_UNUSED=1
  run pick$i $PICK
  tar czf $OUT/s48a.tgz -C $R .
done
