-- wrk script for the twinhub USSD benchmark (driven by bench/ussd.py; see bench/README.md).
--
-- Every wrk thread owns exactly ONE connection (the harness runs wrk with -t == -c), so the
-- thread's request/response calls strictly alternate and each connection walks whole USSD
-- sessions in order: text "" -> "1" -> "1*2" -> "1*2*0", then the next sessionId. wrk's Lua
-- API has no per-connection hook, which is why one connection per thread is the only way to
-- keep the steps of a session in order.
--
-- The clock, histogram, counters, pacing and result file come from wrk_common.lua.
--
-- Settings come from environment variables (the harness sets them):
--   BENCH_RUN          run tag, part of every sessionId (unique across runs and stores)
--   BENCH_ROUND        round number, part of every sessionId (unique across wrk runs)
--   BENCH_SERVICE_CODE url-encoded serviceCode
--   BENCH_PHONE_PREFIX url-encoded phone prefix (8 digits get appended)
--   BENCH_LUA_DIR      the folder of wrk_common.lua
--   BENCH_RESULT_FILE  where done() writes its JSON
--   BENCH_RATE_PER_CONN if > 0: pace each connection to this many requests/s (the "paced"
--                      phase: latency at a given load instead of at saturation, where a
--                      closed loop's latency is just connections / throughput)

local common = dofile(os.getenv("BENCH_LUA_DIR") .. "/wrk_common.lua")

-- This script's counter slots (wrk_common keeps the histogram after them).
local RESPONSES, OK, ERRORS, SESSIONS, NON200, ENDS, OTHER, STEP, NSAMPLES = 0, 1, 2, 3, 4, 5, 6, 7, 8

local counters -- double* into this thread's array
local tid = 0
local session_no = 0
local step = 0
local t0 = 0
local prefix, tail_service, phone_prefix
local texts = { "", "1", "1%2A2", "1%2A2%2A0" } -- "", "1", "1*2", "1*2*0" url-encoded
local STEPS = #texts

function init(args)
   counters, tid = common.counters()
   math.randomseed(tid)
   prefix = string.format("sessionId=bench-%s-r%s-t%d-", common.env("BENCH_RUN", "x"),
                          common.env("BENCH_ROUND", "0"), tid)
   tail_service = "&serviceCode=" .. common.env("BENCH_SERVICE_CODE", "%2A384%2A1%23")
   phone_prefix = "&phoneNumber=" .. common.env("BENCH_PHONE_PREFIX", "%2B2547")
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
end

-- Called when the connection can send; the session state only advances in response(), so
-- wrk's extra verification call of request() and re-sends after socket errors are harmless.
function request()
   local body = prefix .. session_no .. tail_service .. phone_prefix
      .. string.format("%08d", (tid * 7919 + session_no) % 100000000)
      .. "&text=" .. texts[step + 1]
   t0 = common.now_us()
   return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
   common.record_latency(counters, common.now_us() - t0)
   counters[RESPONSES] = counters[RESPONSES] + 1
   if status == 200 and string.sub(body, 1, 4) == "CON " then
      counters[OK] = counters[OK] + 1
   else
      counters[ERRORS] = counters[ERRORS] + 1
      if status ~= 200 then
         counters[NON200] = counters[NON200] + 1
      elseif string.sub(body, 1, 4) == "END " then
         counters[ENDS] = counters[ENDS] + 1
      else
         counters[OTHER] = counters[OTHER] + 1
      end
      common.sample_error(counters, NSAMPLES, string.format(
         "step=%d status=%d body=%s", step, status, string.sub(body or "", 1, 200)))
   end
   step = step + 1
   if step == STEPS then
      step = 0
      session_no = session_no + 1
      counters[SESSIONS] = counters[SESSIONS] + 1
   end
   counters[STEP] = step
end

local function fold(total, c)
   total.responses = total.responses + c[RESPONSES]
   total.ok = total.ok + c[OK]
   total.errors = total.errors + c[ERRORS]
   total.sessions = total.sessions + c[SESSIONS]
   total.non200 = total.non200 + c[NON200]
   total.ends = total.ends + c[ENDS]
   total.other = total.other + c[OTHER]
   if c[STEP] > 0 then
      total.abandoned = total.abandoned + 1
   end
end

function done(summary, latency, requests)
   local total = common.write_results(summary, latency, { responses = 0, ok = 0, errors = 0,
      sessions = 0, non200 = 0, ends = 0, other = 0, abandoned = 0 }, fold, NSAMPLES)
   io.write(string.format("BENCH sessions=%d responses=%d ok=%d errors=%d abandoned=%d\n",
                          total.sessions, total.responses, total.ok, total.errors,
                          total.abandoned))
end
