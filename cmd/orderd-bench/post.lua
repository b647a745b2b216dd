-- post.lua: wrk script that posts pre-signed order webhooks, each request a
-- different body, built before the clock starts so that the client's cost
-- per request is a table lookup.
--
--   wrk -t2 -c64 -d8s -s post.lua URL -- PREFIX FIRST MODE [RATE]
--
-- Thread i (0-based) of this wrk reads PREFIX-<FIRST+i>.txt: one request per
-- line, the Signature header's value, a tab, then the JSON body. MODE
-- "once" stops a thread when its file is used up, so that a receiver that
-- keeps state never sees a repeat (the few requests sent while it stops are
-- counted as repeats); "wrap" starts the file again (for a receiver that
-- keeps nothing, like the verify-only ceiling). RATE paces each thread at
-- that many requests a second: the k-th request of a thread is due k/RATE
-- seconds after its first, whenever a connection is free, so a slow answer
-- delays no later request while a connection is left (open loop). done() prints one line
-- "orderd-bench-result {json}" with the counts and latency percentiles.
--
-- wrk itself always lasts -d, also when every thread stopped early, and
-- divides by it. So each thread notes (on the monotonic clock, through
-- LuaJIT's ffi) when it sent its first request and when it ran out, and
-- when every thread ran out, duration_us is the span from the first start
-- to the last stop; otherwise it is wrk's own duration.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } orderd_bench_timespec;
int clock_gettime(int clk_id, orderd_bench_timespec *tp);
]]
local ts = ffi.new("orderd_bench_timespec")
local CLOCK_MONOTONIC = 1

local function now_us()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

local threads = {}
local nthreads = 0

function setup(thread)
   thread:set("tid", nthreads)
   nthreads = nthreads + 1
   table.insert(threads, thread)
end

local reqs = {}
local n, i = 0, 0
local once = true
sent, repeats = 0, 0
started_us, stopped_us = 0, 0

function init(args)
   local prefix, first, mode = args[1], tonumber(args[2] or "0"), args[3] or "once"
   if prefix == nil then
      error("post.lua: usage: wrk ... -s post.lua URL -- PREFIX FIRST once|wrap")
   end
   once = mode ~= "wrap"
   local rate = tonumber(args[4] or "0")
   if rate > 0 then
      -- wrk asks for delay() only when the script defines it, in whole
      -- milliseconds; the schedule is absolute, so rounding evens out.
      local interval, k, first = 1000000 / rate, 0, 0
      delay = function()
         local now = now_us()
         if first == 0 then
            first = now
         end
         local due = first + k * interval
         k = k + 1
         if due <= now then
            return 0
         end
         return (due - now) / 1000
      end
   end
   local name = prefix .. "-" .. tostring(first + tid) .. ".txt"
   local f = assert(io.open(name, "rb"))
   local headers = { ["Content-Type"] = "application/json" }
   for line in f:lines() do
      local tab = line:find("\t", 1, true)
      if tab then
         headers["Signature"] = line:sub(1, tab - 1)
         n = n + 1
         reqs[n] = wrk.format("POST", nil, headers, line:sub(tab + 1))
      end
   end
   f:close()
   if n == 0 then
      error("post.lua: " .. name .. " holds no request")
   end
end

function request()
   if started_us == 0 then
      started_us = now_us()
   end
   i = i + 1
   if i > n then
      i = 1
      if once and stopped_us == 0 then
         stopped_us = now_us()
         wrk.thread:stop()
      end
   end
   sent = sent + 1
   if sent > n then
      repeats = repeats + 1
   end
   return reqs[i]
end

function done(summary, latency, requests)
   local s, r = 0, 0
   local first, last, all_stopped = math.huge, 0, true
   for _, t in ipairs(threads) do
      s = s + (t:get("sent") or 0)
      r = r + (t:get("repeats") or 0)
      local a, b = t:get("started_us") or 0, t:get("stopped_us") or 0
      if a > 0 and a < first then
         first = a
      end
      if b == 0 then
         all_stopped = false
      elseif b > last then
         last = b
      end
   end
   local duration = summary.duration
   if all_stopped and last > first then
      duration = last - first
   end
   local e = summary.errors
   io.write(string.format(
      'orderd-bench-result {"requests":%d,"duration_us":%d,"wall_us":%d,"sent":%d,"repeats":%d,' ..
      '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
      '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
      summary.requests, duration, summary.duration, s, r,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.max, latency.mean))
end
