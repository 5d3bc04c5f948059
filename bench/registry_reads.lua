-- wrk script for the twinhub registry benchmark's reads (driven by bench/registry.py; see
-- bench/README.md).
--
-- Every request is a GET of one path drawn at random from a file (one path per line), e.g.
-- /v1/domains/did:ixo:entity/<id> for "GET by DID", or a filtered list with a cursor. A reply
-- counts as OK only when it is HTTP 200; everything else is an error (first few kept as
-- samples).
--
-- The harness runs wrk with one connection per thread (-t == -c), so each thread has at most
-- one request in flight and the latency measured here (request() to response()) belongs to
-- one request. The clock, histogram, counters, pacing and result file come from
-- wrk_common.lua.
--
-- Settings come from environment variables (the harness sets them):
--   BENCH_PATHS_FILE    paths to request, one per line, chosen uniformly at random
--   BENCH_AUTH          value of the Authorization header ("Bearer <key>"); kept out of
--                       wrk's command line so it does not show up in logs or `ps`
--   BENCH_LUA_DIR       the folder of wrk_common.lua
--   BENCH_RESULT_FILE   where done() writes its JSON
--   BENCH_RATE_PER_CONN if > 0: pace each connection to this many requests/s (latency at a
--                       given load instead of at saturation, where a closed loop's latency
--                       is mostly connections / throughput)

local common = dofile(os.getenv("BENCH_LUA_DIR") .. "/wrk_common.lua")

-- This script's counter slots (wrk_common keeps the histogram after them).
local RESPONSES, OK, ERRORS, NSAMPLES, BYTES = 0, 1, 2, 3, 4

local counters -- double* into this thread's array
local tid = 0
local t0 = 0
local paths = {}
local npaths = 0
local current = ""

function init(args)
   counters, tid = common.counters()
   paths = common.read_lines(common.env("BENCH_PATHS_FILE", nil))
   npaths = #paths
   -- different threads must not walk the same sequence of "random" paths
   math.randomseed(tid * 7919 + tonumber(common.env("BENCH_SEED", "1")))
   wrk.method = "GET"
   wrk.headers["Authorization"] = common.env("BENCH_AUTH", "")
   wrk.headers["Accept"] = "application/json"
end

function request()
   current = paths[math.random(npaths)]
   t0 = common.now_us()
   return wrk.format(nil, current)
end

function response(status, headers, body)
   common.record_latency(counters, common.now_us() - t0)
   counters[RESPONSES] = counters[RESPONSES] + 1
   counters[BYTES] = counters[BYTES] + #(body or "")
   if status == 200 then
      counters[OK] = counters[OK] + 1
   else
      counters[ERRORS] = counters[ERRORS] + 1
      common.sample_error(counters, NSAMPLES, string.format(
         "GET %s -> %d %s", string.sub(current, 1, 200), status, string.sub(body or "", 1, 200)))
   end
end

local function fold(total, c)
   total.responses = total.responses + c[RESPONSES]
   total.ok = total.ok + c[OK]
   total.errors = total.errors + c[ERRORS]
   total.body_bytes = total.body_bytes + c[BYTES]
end

function done(summary, latency, requests)
   local total = common.write_results(summary, latency,
      { responses = 0, ok = 0, errors = 0, body_bytes = 0 }, fold, NSAMPLES)
   io.write(string.format("BENCH responses=%d ok=%d errors=%d\n", total.responses, total.ok,
                          total.errors))
end
