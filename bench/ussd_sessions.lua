-- wrk script for the twinhub USSD benchmark (driven by bench/ussd.py; see bench/README.md).
--
-- Every wrk thread owns exactly ONE connection (the harness runs wrk with -t == -c), so the
-- thread's request/response calls strictly alternate and each connection walks whole USSD
-- sessions in order: text "" -> "1" -> "1*2" -> "1*2*0", then the next sessionId. wrk's Lua
-- API has no per-connection hook, which is why one connection per thread is the only way to
-- keep the steps of a session in order.
--
-- Counters and a latency histogram live in one C array per thread that the main Lua state
-- allocates (LuaJIT FFI) and done() reads once all threads have stopped; thread:get() is not
-- used for tables because wrk 4.1 copies tables between Lua states incorrectly.
--
-- Settings come from environment variables (the harness sets them):
--   BENCH_RUN          run tag, part of every sessionId (unique across runs and stores)
--   BENCH_ROUND        round number, part of every sessionId (unique across wrk runs)
--   BENCH_SERVICE_CODE url-encoded serviceCode
--   BENCH_PHONE_PREFIX url-encoded phone prefix (8 digits get appended)
--   BENCH_RESULT_FILE  where done() writes its JSON
--   BENCH_RATE_PER_CONN if > 0: pace each connection to this many requests/s (the "paced"
--                      phase: latency at a given load instead of at saturation, where a
--                      closed loop's latency is just connections / throughput)

local ffi = require("ffi")

ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]])

local CLOCK_MONOTONIC = 1

-- Counter slots at the head of each thread's array; the histogram follows.
local RESPONSES, OK, ERRORS, SESSIONS, NON200, ENDS, OTHER, STEP, NSAMPLES = 0, 1, 2, 3, 4, 5, 6, 7, 8
local HIST = 16

-- Latency buckets: 10 us wide below 10 ms (the p99 target lives there), 100 us up to 100 ms,
-- 1 ms up to 10 s, then one overflow bucket.
local NBUCKETS = 1000 + 900 + 9900 + 1
local SLOTS = HIST + NBUCKETS

local function bucket(us)
   if us < 10000 then
      return math.floor(us / 10)
   elseif us < 100000 then
      return 1000 + math.floor((us - 10000) / 100)
   elseif us < 10000000 then
      return 1900 + math.floor((us - 100000) / 1000)
   end
   return NBUCKETS - 1
end

local function bucket_bounds(i)
   if i < 1000 then
      return i * 10, i * 10 + 10
   elseif i < 1900 then
      local lo = 10000 + (i - 1000) * 100
      return lo, lo + 100
   elseif i < NBUCKETS - 1 then
      local lo = 100000 + (i - 1900) * 1000
      return lo, lo + 1000
   end
   return 10000000, -1
end

local function env(name, default)
   local v = os.getenv(name)
   if v == nil or v == "" then
      return default
   end
   return v
end

-- ---------------------------------------------------------------- main Lua state

local threads = {}
local buffers = {} -- keeps the FFI arrays alive until done()

function setup(thread)
   local i = #threads + 1
   local buf = ffi.new("double[?]", SLOTS) -- zero-filled
   threads[i] = thread
   buffers[i] = buf
   thread:set("bench_tid", i)
   thread:set("bench_addr", tonumber(ffi.cast("uintptr_t", buf)))
end

-- ---------------------------------------------------------------- per-thread Lua state

local counters -- double* into this thread's array
local tid = 0
local session_no = 0
local step = 0
local t0 = 0
local prefix, tail_service, phone_prefix
local ts = ffi.new("bench_timespec")
local texts = { "", "1", "1%2A2", "1%2A2%2A0" } -- "", "1", "1*2", "1*2*0" url-encoded
local STEPS = #texts

local function now_us()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

function init(args)
   tid = bench_tid
   math.randomseed(tid)
   counters = ffi.cast("double *", bench_addr)
   prefix = string.format("sessionId=bench-%s-r%s-t%d-", env("BENCH_RUN", "x"),
                          env("BENCH_ROUND", "0"), tid)
   tail_service = "&serviceCode=" .. env("BENCH_SERVICE_CODE", "%2A384%2A1%23")
   phone_prefix = "&phoneNumber=" .. env("BENCH_PHONE_PREFIX", "%2B2547")
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
end

-- Pacing: wrk calls delay() before every request when the function exists. The schedule
-- is absolute (next += interval), so the whole-millisecond timers of wrk do not bias the
-- average rate; a connection that fell behind restarts its schedule instead of bursting.
local rate_per_conn = tonumber(env("BENCH_RATE_PER_CONN", "0")) or 0
if rate_per_conn > 0 then
   local interval_ms = 1000 / rate_per_conn
   local next_ms = nil
   function delay()
      local now = now_us() / 1000
      if next_ms == nil then
         next_ms = now + math.random() * interval_ms -- spread the connections' phases
      else
         next_ms = next_ms + interval_ms
         if next_ms < now - interval_ms then
            next_ms = now
         end
      end
      local d = next_ms - now
      if d <= 0 then
         return 0
      end
      return math.floor(d)
   end
end

-- Called when the connection can send; the session state only advances in response(), so
-- wrk's extra verification call of request() and re-sends after socket errors are harmless.
function request()
   local body = prefix .. session_no .. tail_service .. phone_prefix
      .. string.format("%08d", (tid * 7919 + session_no) % 100000000)
      .. "&text=" .. texts[step + 1]
   t0 = now_us()
   return wrk.format(nil, nil, nil, body)
end

local function sample_error(status, body)
   local n = counters[NSAMPLES]
   if n < 3 then
      counters[NSAMPLES] = n + 1
      -- Strings are safe to copy with thread:get(), only tables are not.
      _G["bench_err_" .. (n + 1)] = string.format("step=%d status=%d body=%s", step, status,
                                                  string.sub(body or "", 1, 200))
   end
end

function response(status, headers, body)
   local us = now_us() - t0
   local b = HIST + bucket(us)
   counters[b] = counters[b] + 1
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
      sample_error(status, body)
   end
   step = step + 1
   if step == STEPS then
      step = 0
      session_no = session_no + 1
      counters[SESSIONS] = counters[SESSIONS] + 1
   end
   counters[STEP] = step
end

-- ---------------------------------------------------------------- main Lua state, at the end

local function json_string(s)
   return '"' .. string.gsub(s, '[%c"\\]', function(c)
      return string.format("\\u%04x", string.byte(c))
   end) .. '"'
end

function done(summary, latency, requests)
   local total = { responses = 0, ok = 0, errors = 0, sessions = 0, non200 = 0, ends = 0,
                   other = 0, abandoned = 0 }
   local hist = {}
   local samples = {}
   for i, thread in ipairs(threads) do
      local c = buffers[i]
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
      for b = 0, NBUCKETS - 1 do
         local n = c[HIST + b]
         if n > 0 then
            hist[b] = (hist[b] or 0) + n
         end
      end
      for k = 1, c[NSAMPLES] do
         local s = thread:get("bench_err_" .. k)
         if s and #samples < 10 then
            samples[#samples + 1] = s
         end
      end
   end

   local out = {}
   out[#out + 1] = string.format('"duration_us":%d,"wrk_requests":%d', summary.duration,
                                 summary.requests)
   local e = summary.errors
   out[#out + 1] = string.format(
      '"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},"wrk_status_errors":%d',
      e.connect, e.read, e.write, e.timeout, e.status)
   for k, v in pairs(total) do
      out[#out + 1] = string.format('"%s":%d', k, v)
   end
   out[#out + 1] = string.format('"threads":%d', #threads)
   out[#out + 1] = string.format(
      '"wrk_latency_us":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f}',
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9), latency.max, latency.mean)
   local h = {}
   for b = 0, NBUCKETS - 1 do
      if hist[b] then
         local lo, hi = bucket_bounds(b)
         h[#h + 1] = string.format("[%d,%d,%d]", lo, hi, hist[b])
      end
   end
   out[#out + 1] = '"histogram_us":[' .. table.concat(h, ",") .. "]"
   local s = {}
   for k, v in ipairs(samples) do
      s[k] = json_string(v)
   end
   out[#out + 1] = '"error_samples":[' .. table.concat(s, ",") .. "]"
   local doc = "{" .. table.concat(out, ",") .. "}\n"

   local path = env("BENCH_RESULT_FILE", nil)
   if path then
      local f = assert(io.open(path, "w"))
      f:write(doc)
      f:close()
   end
   io.write(string.format("BENCH sessions=%d responses=%d ok=%d errors=%d abandoned=%d\n",
                          total.sessions, total.responses, total.ok, total.errors,
                          total.abandoned))
end
