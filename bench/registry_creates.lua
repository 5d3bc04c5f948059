-- wrk script for the twinhub registry benchmark's creates (driven by bench/registry.py with
-- --create-client wrk, the default; see bench/README.md): POST /v1/domains with a body of
-- its own per request, the same mix as create_body in bench/registry.py (index % 20 == 0:
-- an Organisation, == 10: a Project, else a clean-cooking Device whose serial number
-- "S-<BENCH_RUN_TAG>-<index>" is unique per index). A C client on the other core, so the
-- load generator is not what limits the server (the Python client used a whole core at
-- ~500 creates/s).
--
-- Thread t of T (BENCH_THREADS) sends indices BENCH_INDEX_BASE + (n - 1) * T + (t - 1) for
-- its n-th request, so no index is sent twice; it stops (wrk.thread:stop()) once it has its
-- share of BENCH_TARGET creates (201), and counts as `exhausted`. A failed create is counted
-- as an error and the thread goes on with its next index, as the Python client does; 200
-- failures in a row stop the thread. The largest n sent (max_n) lets the harness move its
-- next index past every one this run used. The harness takes the rate over the time the
-- threads were busy (first_us .. last_us).
--
-- Every 201's kind, DID and membership group (organisations) go to this thread's file
-- (BENCH_IDS_OUT-<thread>.txt) as "<kind>\t<did>\t<group>" lines: the reads phase GETs them.
-- Other settings as in claims_writes.lua (BENCH_AUTH, BENCH_LUA_DIR, BENCH_RESULT_FILE).
-- One connection per thread (-t == -c). wrk calls request() once per run without sending it
-- (checking the script); that index is then never created, which leaves a gap only.

local common = dofile(os.getenv("BENCH_LUA_DIR") .. "/wrk_common.lua")

-- The write scripts' counter slots (wrk_common.WRITES; the histogram follows them).
local W = common.WRITES
local OK, ERRORS, NSAMPLES = W.OK, W.ERRORS, W.NSAMPLES
local EXHAUSTED, MAXN = W.EXHAUSTED, W.MAXN

local FUELS = { "charcoal", "lpg", "wood", "ethanol", "biogas" }

local counters -- double* into this thread's array
local tid = 0
local out
local t0 = 0
local n = 0
local base, threads, share, tag = 0, 1, 0, ""
local ok_here, streak = 0, 0
local index, kind = 0, ""
local filler = false

function init(args)
   counters, tid = common.counters()
   threads = tonumber(common.env("BENCH_THREADS", "1"))
   base = tonumber((assert(common.env("BENCH_INDEX_BASE", nil), "BENCH_INDEX_BASE is not set")))
   local target = tonumber((assert(common.env("BENCH_TARGET", nil), "BENCH_TARGET is not set")))
   share = math.floor(target / threads) + ((tid <= target % threads) and 1 or 0)
   tag = assert(common.env("BENCH_RUN_TAG", nil), "BENCH_RUN_TAG is not set")
   out = assert(io.open(common.env("BENCH_IDS_OUT", "ids") .. "-" .. tid .. ".txt", "w"))
   out:setvbuf("line") -- wrk never closes a thread's Lua state: nothing may sit in a buffer
   wrk.method = "POST"
   wrk.path = "/v1/domains"
   wrk.headers["Authorization"] = common.env("BENCH_AUTH", "")
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Accept"] = "application/json"
end

-- The index-th domain of the mix, as create_body in bench/registry.py.
local function body_of(i)
   if i % 20 == 0 then
      return "organisation", string.format(
         '{"type":"Organisation","class":"did:ixo:protocol/organisation",'
            .. '"metadata":{"name":"Bench Org %d"},'
            .. '"properties":{"legalName":"Bench Org %d Ltd","country":"KE"}}', i, i)
   elseif i % 20 == 10 then
      return "project", string.format(
         '{"type":"Project","class":"did:ixo:protocol/project",'
            .. '"metadata":{"name":"Bench Project %d"},'
            .. '"properties":{"country":"KE","methodology":"clean-cooking"}}', i)
   end
   return "device", string.format(
      '{"type":"Device","class":"did:ixo:protocol/clean-cooking","metadata":{"name":"Stove %d"},'
         .. '"properties":{"serialNumber":"S-%s-%d","fuelType":"%s"}}',
      i, tag, i, FUELS[i % #FUELS + 1])
end

function request()
   if ok_here >= share or streak >= 200 then
      counters[EXHAUSTED] = 1
      filler = true
      wrk.thread:stop()
      return wrk.format("GET", "/health")
   end
   n = n + 1
   counters[MAXN] = n
   index = base + (n - 1) * threads + (tid - 1)
   local body
   kind, body = body_of(index)
   t0 = common.write_sent(counters)
   return wrk.format(nil, nil, nil, body)
end

function response(status, headers, reply)
   if filler then
      return
   end
   common.write_replied(counters, t0, reply)
   local did = status == 201 and string.match(reply or "", '^{"did":"([^"]+)"') or nil
   if did then
      counters[OK] = counters[OK] + 1
      ok_here, streak = ok_here + 1, 0
      local group = string.match(reply, '"membershipGroup":"([^"]+)"') or ""
      out:write(kind, "\t", did, "\t", group, "\n")
   else
      counters[ERRORS] = counters[ERRORS] + 1
      streak = streak + 1
      common.sample_error(counters, NSAMPLES, string.format(
         "POST #%d (%s) -> %d %s", index, kind, status, string.sub(reply or "", 1, 200)))
   end
end

function done(summary, latency, requests)
   local total = common.write_totals(summary, latency)
   io.write(string.format("BENCH creates responses=%d ok=%d errors=%d exhausted=%d\n",
                          total.responses, total.ok, total.errors, total.exhausted))
end
