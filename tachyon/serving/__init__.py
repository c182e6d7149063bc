"""OpenAI-compatible server (`tachyon serve`): FastAPI + uvicorn over the engine's AsyncEngine.

Modules, one job each: config (ServerConfig, models.yaml), cli (flags), registry (served models),
protocol (request bodies), params (-> SamplingParams + caps), preprocess (templating and
tokenising off the loop), generation (engine streams, abort, metrics), formatting (wire
objects), routes_* (endpoints), api (guards shared by routes), auth, ratelimit, admission,
metrics, health, reqlog (JSON logs), middleware (size limits), app (factory), server (uvicorn +
drain). Usage and guarantees: tachyon/serving/README.md.
"""
