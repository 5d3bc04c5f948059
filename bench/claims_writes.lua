-- wrk script for the twinhub claims benchmark's writes (driven by bench/claims.py; see
-- bench/README.md): claim submissions and oracle evaluations, each a POST with its own body.
--
--   BENCH_MODE=submit    POST BENCH_PATH (/v1/claim-collections/<id>/claims) with
--                        {"id": "<BENCH_ID_PREFIX>-t<thread>-<n>", "asset": <stove>, "data":
--                        {"reportType": "cooking", "mealsCooked": ..., "periodStart": ...,
--                        "periodEnd": ...}}; OK = 201. The claim protocol counts one claim
--                        per stove and calendar month, so each request names a stove-month
--                        of its own: submission slot i = BENCH_SLOT_BASE + (n - 1) * T +
--                        (thread - 1) (T = BENCH_THREADS) is the stove on line
--                        i % #lines + 1 of BENCH_PATHS_FILE in the calendar month
--                        floor(i / #lines) months before BENCH_MONTH_TOP (months counted as
--                        year * 12 + month - 1), as MonthSlots.submission in bench/claims.py.
--                        The id of every 201 is written to this thread's id file; the
--                        largest n sent (max_n) lets the harness move BENCH_SLOT_BASE past
--                        every slot this run used.
--   BENCH_MODE=evaluate  POST /v1/claims/<id>/evaluations with the body BENCH_BODY, for the
--                        claim ids of BENCH_PATHS_FILE: thread t of T takes lines t, t+T,
--                        t+2T, ... in order, so no claim is evaluated twice; OK = 200 with
--                        every tab-separated part of BENCH_EXPECT (e.g. "status":"approved"
--                        and the computed amount) in the reply. Every id is
--                        written to this thread's id file as it is sent (the harness drops
--                        those from its pool of pending claims). A thread that runs out of
--                        ids stops (wrk.thread:stop()) and counts as `exhausted`; the harness
--                        then takes the rate over the time the threads were busy
--                        (first_us .. last_us) instead of wrk's fixed duration.
--
-- Other settings (the harness sets them): BENCH_AUTH (Authorization header, kept out of
-- wrk's command line), BENCH_IDS_OUT (prefix of the per-thread id files:
-- <prefix>-<thread>.txt), BENCH_THREADS (wrk's thread count), BENCH_LUA_DIR,
-- BENCH_RESULT_FILE, BENCH_RATE_PER_CONN (pacing) and BENCH_SEED, as in registry_reads.lua.
-- One connection per thread (-t == -c), so request() to response() is one request's latency.
-- wrk calls request() once per run without sending it (checking the script), so `sent` can
-- be one more than what went out, and that one id is dropped from the pool without being
-- evaluated.
-- The clock, histogram, counters, pacing and result file come from wrk_common.lua.

local common = dofile(os.getenv("BENCH_LUA_DIR") .. "/wrk_common.lua")

-- The write scripts' counter slots (wrk_common.WRITES; the histogram follows them).
local W = common.WRITES
local OK, ERRORS, NSAMPLES = W.OK, W.ERRORS, W.NSAMPLES
local EXHAUSTED, MAXN = W.EXHAUSTED, W.MAXN

local counters -- double* into this thread's array
local tid = 0
local mode = "submit"
local out -- this thread's id file
local t0 = 0
local current = ""
local filler = false -- the request sent after running out of ids (not counted)
-- submit
local path, prefix, assets
local n = 0
local slot_base, month_top, threads = 0, 0, 1
-- evaluate
local ids = {}
local next_id = 0
local body
local expects = {}

function init(args)
   counters, tid = common.counters()
   mode = common.env("BENCH_MODE", "submit")
   local lines = common.read_lines(common.env("BENCH_PATHS_FILE", nil))
   threads = tonumber(common.env("BENCH_THREADS", "1"))
   if mode == "submit" then
      assets = lines
      path = assert(common.env("BENCH_PATH", nil), "BENCH_PATH is not set")
      prefix = assert(common.env("BENCH_ID_PREFIX", nil), "BENCH_ID_PREFIX is not set")
         .. "-t" .. tid .. "-"
      slot_base = tonumber((assert(common.env("BENCH_SLOT_BASE", nil), "BENCH_SLOT_BASE is not set")))
      month_top = tonumber((assert(common.env("BENCH_MONTH_TOP", nil), "BENCH_MONTH_TOP is not set")))
   else
      assert(mode == "evaluate", "BENCH_MODE is submit or evaluate")
      for i = tid, #lines, threads do
         ids[#ids + 1] = lines[i]
      end
      body = assert(common.env("BENCH_BODY", nil), "BENCH_BODY is not set")
      for part in string.gmatch(common.env("BENCH_EXPECT", ""), "[^\t]+") do
         expects[#expects + 1] = part
      end
   end
   out = assert(io.open(common.env("BENCH_IDS_OUT", "ids") .. "-" .. tid .. ".txt", "w"))
   out:setvbuf("line") -- wrk never closes a thread's Lua state: nothing may sit in a buffer
   math.randomseed(tid * 7919 + tonumber(common.env("BENCH_SEED", "1")))
   wrk.method = "POST"
   wrk.headers["Authorization"] = common.env("BENCH_AUTH", "")
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Accept"] = "application/json"
end

local function started()
   t0 = common.write_sent(counters)
end

-- "YYYY-MM-01T00:00:00Z" of month index m (year * 12 + month - 1)
local function month_start(m)
   return string.format("%04d-%02d-01T00:00:00Z", math.floor(m / 12), m % 12 + 1)
end

function request()
   if mode == "submit" then
      n = n + 1
      counters[MAXN] = n
      current = prefix .. n
      local slot = slot_base + (n - 1) * threads + (tid - 1)
      local month = month_top - math.floor(slot / #assets)
      local claim = string.format(
         '{"id":"%s","asset":"%s","data":{"reportType":"cooking","mealsCooked":%d,'
            .. '"periodStart":"%s","periodEnd":"%s"}}',
         current, assets[slot % #assets + 1], n % 9 + 1, month_start(month),
         month_start(month + 1))
      started()
      return wrk.format(nil, path, nil, claim)
   end
   next_id = next_id + 1
   if next_id > #ids then
      counters[EXHAUSTED] = 1
      filler = true
      wrk.thread:stop()
      return wrk.format("GET", "/health")
   end
   current = ids[next_id]
   out:write(current, "\n")
   started()
   return wrk.format(nil, "/v1/claims/" .. current .. "/evaluations", nil, body)
end

function response(status, headers, reply)
   if filler then
      return
   end
   common.write_replied(counters, t0, reply)
   local ok
   if mode == "submit" then
      ok = status == 201
   else
      ok = status == 200
      for _, part in ipairs(expects) do
         ok = ok and string.find(reply or "", part, 1, true) ~= nil
      end
   end
   if ok then
      counters[OK] = counters[OK] + 1
      if mode == "submit" then
         out:write(current, "\n")
      end
   else
      counters[ERRORS] = counters[ERRORS] + 1
      common.sample_error(counters, NSAMPLES, string.format(
         "POST %s (%s) -> %d %s", mode, current, status, string.sub(reply or "", 1, 200)))
   end
end

function done(summary, latency, requests)
   local total = common.write_totals(summary, latency)
   io.write(string.format("BENCH %s responses=%d ok=%d errors=%d exhausted=%d\n",
                          common.env("BENCH_MODE", "submit"),
                          total.responses, total.ok, total.errors, total.exhausted))
end
