# Stop 40, call 4: the mixed attention's chunk tile on flat-shaped steps (mixed_attn_tiles.py), then 7B nano256 at
# the defaults and under the best tile (TACHYON_PREFILL_TILE, when it beats the default by >= 3% on the first step).
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/offline
timeout 120 python3 benchmarks/gpu/mixed_attn_tiles.py --out $OUT 2>&1 | f | tail -40
BEST=$(python3 - <<'PY'
import json, os
r = json.load(open(os.environ["OUT"] + "/mixed_attn_tiles.json"))["results"][0]["forms"]
tiles = {k: v["us"] for k, v in r.items() if ":" in k and "us" in v}
best = min(tiles, key=tiles.get) if tiles else ""
print(best if best and tiles[best] <= 0.97 * r["default"]["us"] else "")
PY
)
echo "best tile: '$BEST'"
run() {  # tag, env
  env $2 timeout 100 $B bench offline --backend tachyon --model qwen2.5-7b --dummy --workload nano256 \
    --output $OUT/offline/nano256_$1.json 2>&1 | f | grep "runs:\|^| tachyon\|Error" | sed "s/^/$1 /"
}
if [ -n "$BEST" ]; then
  run default ""; run tile "TACHYON_PREFILL_TILE=$BEST"; run default2 ""; run tile2 "TACHYON_PREFILL_TILE=$BEST"
fi
