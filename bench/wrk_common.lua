-- What the twinhub wrk scripts share: a monotonic clock, the latency histogram that
-- bench/ussd.py's percentiles_ms reads, per-thread counters in FFI arrays, pacing, error
-- samples and the JSON written by done(). Each script loads it with
--   local common = dofile(os.getenv("BENCH_LUA_DIR") .. "/wrk_common.lua")
-- (the harness sets BENCH_LUA_DIR), once in wrk's main Lua state and once in each thread's.
--
-- Counters and the histogram live in one C array per thread that the main state allocates
-- and done() reads once all threads have stopped (thread:get() copies tables incorrectly in
-- wrk 4.1, so only numbers and strings cross between states).

local ffi = require("ffi")

ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]])

local M = {}
local CLOCK_MONOTONIC = 1
local ts = ffi.new("bench_timespec")

-- The first HIST slots of a thread's array are the script's counters; the histogram follows.
M.HIST = 16
-- Latency buckets: 10 us wide below 10 ms (where the p99 targets live), 100 us up to 100 ms,
-- 1 ms up to 10 s, then one overflow bucket.
M.NBUCKETS = 1000 + 900 + 9900 + 1

function M.env(name, default)
   local v = os.getenv(name)
   if v == nil or v == "" then
      return default
   end
   return v
end

-- The non-empty lines of a file (paths, DIDs, claim ids), in order; fails when there are none.
function M.read_lines(name)
   assert(name, "no input file given")
   local lines = {}
   local file = assert(io.open(name, "r"))
   for line in file:lines() do
      if #line > 0 then
         lines[#lines + 1] = line
      end
   end
   file:close()
   assert(#lines > 0, name .. " is empty")
   return lines
end

function M.now_us()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

local function bucket(us)
   if us < 10000 then
      return math.floor(us / 10)
   elseif us < 100000 then
      return 1000 + math.floor((us - 10000) / 100)
   elseif us < 10000000 then
      return 1900 + math.floor((us - 100000) / 1000)
   end
   return M.NBUCKETS - 1
end

local function bucket_bounds(i)
   if i < 1000 then
      return i * 10, i * 10 + 10
   elseif i < 1900 then
      local lo = 10000 + (i - 1000) * 100
      return lo, lo + 100
   elseif i < M.NBUCKETS - 1 then
      local lo = 100000 + (i - 1900) * 1000
      return lo, lo + 1000
   end
   return 10000000, -1
end

-- ------------------------------------------------------------------ main Lua state

M.threads = {}
M.buffers = {} -- keeps the FFI arrays alive until done()

function setup(thread)
   local i = #M.threads + 1
   local buf = ffi.new("double[?]", M.HIST + M.NBUCKETS) -- zero-filled
   M.threads[i] = thread
   M.buffers[i] = buf
   thread:set("bench_tid", i)
   thread:set("bench_addr", tonumber(ffi.cast("uintptr_t", buf)))
end

-- ------------------------------------------------------------------ per-thread Lua state

-- This thread's counters (double*), once wrk has run setup(); call from init().
function M.counters()
   return ffi.cast("double *", bench_addr), bench_tid
end

function M.record_latency(counters, us)
   local b = M.HIST + bucket(us)
   counters[b] = counters[b] + 1
end

-- Keep the first few error descriptions; `slot` is the script's sample-count counter.
function M.sample_error(counters, slot, text)
   local n = counters[slot]
   if n < 3 then
      counters[slot] = n + 1
      _G["bench_err_" .. (n + 1)] = text -- strings are safe to copy with thread:get()
   end
end

-- Pacing: wrk calls delay() before every request when the function exists. The schedule
-- is absolute (next += interval), so the whole-millisecond timers of wrk do not bias the
-- average rate; a connection that fell behind restarts its schedule instead of bursting.
local rate_per_conn = tonumber(M.env("BENCH_RATE_PER_CONN", "0")) or 0
if rate_per_conn > 0 then
   local interval_ms = 1000 / rate_per_conn
   local next_ms = nil
   function delay()
      local now = M.now_us() / 1000
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

-- ------------------------------------------------------------------ main Lua state, at the end

local function json_string(s)
   return '"' .. string.gsub(s, '[%c"\\]', function(c)
      return string.format("\\u%04x", string.byte(c))
   end) .. '"'
end

-- Merge every thread's counters and histogram and write BENCH_RESULT_FILE as JSON.
-- `fold(total, counters)` adds one thread's script-specific counters to `total` (a table
-- of numbers, written as top-level fields); `samples_slot` is the sample-count counter.
function M.write_results(summary, latency, total, fold, samples_slot)
   local hist = {}
   local samples = {}
   for i, thread in ipairs(M.threads) do
      local c = M.buffers[i]
      fold(total, c)
      for b = 0, M.NBUCKETS - 1 do
         local n = c[M.HIST + b]
         if n > 0 then
            hist[b] = (hist[b] or 0) + n
         end
      end
      for k = 1, c[samples_slot] do
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
   out[#out + 1] = string.format('"threads":%d', #M.threads)
   out[#out + 1] = string.format(
      '"wrk_latency_us":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f}',
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9), latency.max, latency.mean)
   local h = {}
   for b = 0, M.NBUCKETS - 1 do
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

   local path = M.env("BENCH_RESULT_FILE", nil)
   if path then
      local f = assert(io.open(path, "w"))
      f:write("{" .. table.concat(out, ",") .. "}\n")
      f:close()
   end
   return total
end

-- The counter slots of the write scripts (claims_writes.lua, registry_creates.lua), and
-- their totals over every thread: counts added, the first start the earliest, the last
-- reply and the largest index sent the latest.
M.WRITES = { RESPONSES = 0, OK = 1, ERRORS = 2, NSAMPLES = 3, BYTES = 4, FIRST = 5, LAST = 6,
             SENT = 7, EXHAUSTED = 8, MAXN = 9 }

local function fold_writes(total, c)
   local W = M.WRITES
   total.responses = total.responses + c[W.RESPONSES]
   total.ok = total.ok + c[W.OK]
   total.errors = total.errors + c[W.ERRORS]
   total.body_bytes = total.body_bytes + c[W.BYTES]
   total.sent = total.sent + c[W.SENT]
   total.exhausted = total.exhausted + c[W.EXHAUSTED]
   if c[W.MAXN] > total.max_n then
      total.max_n = c[W.MAXN]
   end
   if c[W.FIRST] > 0 and (total.first_us == 0 or c[W.FIRST] < total.first_us) then
      total.first_us = c[W.FIRST]
   end
   if c[W.LAST] > total.last_us then
      total.last_us = c[W.LAST]
   end
end

-- A write script's request leaving (its start time, counted) and its reply arriving
-- (latency, last reply, size counted).
function M.write_sent(counters)
   local W, t0 = M.WRITES, M.now_us()
   if counters[W.FIRST] == 0 then
      counters[W.FIRST] = math.floor(t0)
   end
   counters[W.SENT] = counters[W.SENT] + 1
   return t0
end

function M.write_replied(counters, t0, reply)
   local W, now = M.WRITES, M.now_us()
   M.record_latency(counters, now - t0)
   counters[W.LAST] = math.floor(now)
   counters[W.RESPONSES] = counters[W.RESPONSES] + 1
   counters[W.BYTES] = counters[W.BYTES] + #(reply or "")
end

function M.write_totals(summary, latency)
   return M.write_results(summary, latency, {
      responses = 0, ok = 0, errors = 0, body_bytes = 0, sent = 0, exhausted = 0,
      first_us = 0, last_us = 0, max_n = 0 }, fold_writes, M.WRITES.NSAMPLES)
end

return M
