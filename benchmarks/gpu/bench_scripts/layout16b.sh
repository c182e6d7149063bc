# Session 16, after layout16 (the slow mode follows a pad held before the build, the same pads in two processes;
# a 1 MiB pad, which goes to the allocator's small pool and moves no weight, KV or graph buffer, makes it slow):
# small-pool pads of 0-1,024 KiB in two plain processes, and in the first the live blocks of the 0 and 1,024 KiB
# builds (address, size, pool, allocating frames) to see which small buffers a pad moves.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16b.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16b
mkdir -p $R
pack() { tar czf $OUT/layout16b.tgz -C $R .; }
for p in 1 2; do
  snap=""
  [ $p = 1 ] && snap="--snapshot 0,1024"
  echo "== plain p$p $(date +%T)" | tee -a $R/layout.txt
  timeout ${TMO:-200} python3 benchmarks/gpu/layout_probe.py --kib --pads ${PADS:-0,4,16,64,128,256,512,768,1024} \
    --runs 4 $snap --out $R/layout_p$p.json 2>&1 | f | grep -E "pad |Error|error" | tee -a $R/layout.txt
  pack
done
