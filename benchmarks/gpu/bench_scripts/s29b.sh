# Session 29 (stop 36), second call: where the flat policy's time goes. step_timeline.py on nano256 for 7B fcfs and
# flat (flat with a profiled window of mixed steps) and 0.6B flat. Packed into $OUT/s29b.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s29b.sh (carry .whl)
# Runs only on trees a1f32aa..c15c2ae: the flat policy was removed at d674238.
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s29b
mkdir -p $R
pack() { tar czf $OUT/s29b.tgz -C $R .; }
T="python3 benchmarks/gpu/step_timeline.py --workload nano256 --out $R"
timeout 120 $T --shape qwen2.5-7b --scheduling-policy flat --profile-steps 400:403,900:903 2>&1 | f | grep -v "^ *\"\|^ *[{}]" | tail -5
pack
timeout 120 $T --shape qwen2.5-7b --scheduling-policy fcfs 2>&1 | f | grep -v "^ *\"\|^ *[{}]" | tail -5
pack
timeout 120 $T --shape qwen3-0.6b --scheduling-policy flat 2>&1 | f | grep -v "^ *\"\|^ *[{}]" | tail -5
pack
python3 - <<'PY'
import json, glob
for p in sorted(glob.glob("/tmp/s29b/step_timeline_*.json")):
    d = json.load(open(p))
    print(p.split("/")[-1], f"total {d['total_s']:.2f} s, {d['steps']} steps")
    for k, v in d["by_kind"].items():
        print("  ", k, v["steps"], f"{v['ms']:.0f} ms", v["tokens"])
    for pr in d["profiles"]:
        print("   profile", {k: (round(v, 2) if isinstance(v, float) else v) for k, v in pr.items() if not isinstance(v, (dict, list))})
PY
