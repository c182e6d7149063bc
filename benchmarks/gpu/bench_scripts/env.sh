# TACHYON_GIT_SHA: pass the sha from the machine that sends the call (the device checkout's .git is the one the session
# started from, so `git rev-parse` there names a stale commit); the results' source_digest names the code that ran.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TACHYON_TEST_SKIP_MISSING_MODELS=1 TACHYON_GIT_SHA=${TACHYON_GIT_SHA:-unknown}
mkdir -p /tmp/res
B="python3 benchmarks/gpu/bench_scripts/bench.py"
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }  # log filter (older scripts define their own)
wait_healthy() {  # until the server on 127.0.0.1:8000 answers /health with 200 (at most ~5 minutes)
  python3 - <<'PY'
import time, httpx
for _ in range(150):
    try:
        if httpx.get("http://127.0.0.1:8000/health", timeout=2).status_code == 200:
            print("healthy"); break
    except Exception:
        pass
    time.sleep(2)
PY
}
