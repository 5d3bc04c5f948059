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
-- one request. Counters and a latency histogram live in one C array per thread that the main
-- Lua state allocates (LuaJIT FFI) and done() reads once all threads have stopped
-- (thread:get() copies tables incorrectly in wrk 4.1, so only numbers and strings cross).
--
-- Settings come from environment variables (the harness sets them):
--   BENCH_PATHS_FILE    paths to request, one per line, chosen uniformly at random
--   BENCH_AUTH          value of the Authorization header ("Bearer <key>"); kept out of
--                       wrk's command line so it does not show up in logs or `ps`
--   BENCH_RESULT_FILE   where done() writes its JSON
--   BENCH_RATE_PER_CONN if > 0: pace each connection to this many requests/s (latency at a
--                       given load instead of at saturation, where a closed loop's latency
--                       is mostly connections / throughput)

local ffi = require("ffi")

ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]])

local CLOCK_MONOTONIC = 1

-- Counter slots at the head of each thread's array; the histogram follows.
local RESPONSES, OK, ERRORS, NSAMPLES, BYTES = 0, 1, 2, 3, 4
local HIST = 16

-- Latency buckets (the same as bench/ussd_sessions.lua, so bench/ussd.py's percentiles_ms
-- reads both): 10 us wide below 10 ms, 100 us up to 100 ms, 1 ms up to 10 s, then overflow.
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
local t0 = 0
local paths = {}
local npaths = 0
local current = ""
local ts = ffi.new("bench_timespec")

local function now_us()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

function init(args)
   tid = bench_tid
   counters = ffi.cast("double *", bench_addr)
   local name = env("BENCH_PATHS_FILE", nil)
   assert(name, "BENCH_PATHS_FILE is not set")
   local file = assert(io.open(name, "r"))
   for line in file:lines() do
      if #line > 0 then
         npaths = npaths + 1
         paths[npaths] = line
      end
   end
   file:close()
   assert(npaths > 0, "BENCH_PATHS_FILE is empty")
   -- different threads must not walk the same sequence of "random" paths
   math.randomseed(tid * 7919 + tonumber(env("BENCH_SEED", "1")))
   wrk.method = "GET"
   wrk.headers["Authorization"] = env("BENCH_AUTH", "")
   wrk.headers["Accept"] = "application/json"
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

function request()
   current = paths[math.random(npaths)]
   t0 = now_us()
   return wrk.format(nil, current)
end

local function sample_error(status, body)
   local n = counters[NSAMPLES]
   if n < 3 then
      counters[NSAMPLES] = n + 1
      -- Strings are safe to copy with thread:get(), only tables are not.
      _G["bench_err_" .. (n + 1)] = string.format("GET %s -> %d %s", string.sub(current, 1, 200),
                                                  status, string.sub(body or "", 1, 200))
   end
end

function response(status, headers, body)
   local us = now_us() - t0
   local b = HIST + bucket(us)
   counters[b] = counters[b] + 1
   counters[RESPONSES] = counters[RESPONSES] + 1
   counters[BYTES] = counters[BYTES] + #(body or "")
   if status == 200 then
      counters[OK] = counters[OK] + 1
   else
      counters[ERRORS] = counters[ERRORS] + 1
      sample_error(status, body)
   end
end

-- ---------------------------------------------------------------- main Lua state, at the end

local function json_string(s)
   return '"' .. string.gsub(s, '[%c"\\]', function(c)
      return string.format("\\u%04x", string.byte(c))
   end) .. '"'
end

function done(summary, latency, requests)
   local total = { responses = 0, ok = 0, errors = 0, body_bytes = 0 }
   local hist = {}
   local samples = {}
   for i, thread in ipairs(threads) do
      local c = buffers[i]
      total.responses = total.responses + c[RESPONSES]
      total.ok = total.ok + c[OK]
      total.errors = total.errors + c[ERRORS]
      total.body_bytes = total.body_bytes + c[BYTES]
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
   io.write(string.format("BENCH responses=%d ok=%d errors=%d\n", total.responses, total.ok,
                          total.errors))
end
