# Session 29 (stop 36), kernel breakdown of the flat policy's mixed steps: step_timeline.py (7B nano256, flat) with
# a profiled window at steps 400-403, with the chunk's keys split (the default) and unsplit
# (TACHYON_CHUNK_KV_SPLITS=1). Packed into $OUT/s29c.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s29c.sh (carry .whl)
# Runs only on trees a1f32aa..c15c2ae: the flat policy was removed at d674238.
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s29c
mkdir -p $R/split $R/unsplit
pack() { tar czf $OUT/s29c.tgz -C $R .; }
T="python3 benchmarks/gpu/step_timeline.py --workload nano256 --shape qwen2.5-7b --scheduling-policy flat --profile-steps 400:403"
timeout 100 $T --out $R/split > $R/split.log 2>&1; pack
TACHYON_CHUNK_KV_SPLITS=1 timeout 100 $T --out $R/unsplit > $R/unsplit.log 2>&1; pack
python3 - <<'PY'
import json, glob
for p in sorted(glob.glob("/tmp/s29c/*/step_timeline_*.json")):
    d = json.load(open(p))
    for pr in d["profiles"]:
        k = pr["kernels_ms_per_step"]
        print(p.split("/")[3], "wall", round(pr["wall_ms"], 2), "busy", round(pr["gpu_busy_ms"], 2),
              {a[:28]: round(b, 3) for a, b in sorted(k.items(), key=lambda x: -x[1])[:9]})
    raw = d["raw"]
    print("  steps 404-900 mean ms", round(sum(s["ms"] for s in raw[404:900]) / 496, 3))
PY
