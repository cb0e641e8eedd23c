-- recover: after a crash, put every in-flight URL back at the front of its visit state, clear
-- the busy marks and rebuild every view's workbench entries and workbench from the visit states.
-- ARGV: prefix, now, host_delay, ip_delay. EVERY host and IP waits a full delay from now
-- (delay_host_and_ip, from _delay.lua; the host delay being at least the host's capped robots.txt Crawl-delay, stored in P cdelay): with
-- appendfsync everysec a kill -9 can lose the last second of acquires and releases, so the
-- stored next-fetch times and busy marks may be older than the requests really made; any
-- response before the crash ended before now, so now + delay is always late enough.
-- Returns the number of URLs put back.
local P = ARGV[1]
local now, host_delay, ip_delay = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local known = redis.call('HGETALL', P .. 'hostip')
local hbusy = redis.call('HGETALL', P .. 'hbusy')
for _, pairs_ in ipairs({known, hbusy}) do
  for i = 1, #pairs_, 2 do
    delay_host_and_ip(P, pairs_[i], pairs_[i + 1], now, host_delay, ip_delay)
  end
end
local inflight = redis.call('HGETALL', P .. 'inflight')
for i = 1, #inflight, 2 do
  local url, host = inflight[i], inflight[i + 1]
  redis.call('LPUSH', P .. 'vs:' .. host, string.sub(url, #host + 2))
  redis.call('SADD', redis.call('HGET', P .. 'howner', host) .. 'active', host)
end
redis.call('INCRBY', P .. 'queued', #inflight / 2)
redis.call('DEL', P .. 'inflight', P .. 'hbusy', P .. 'ibusy', P .. 'borrowed')
for _, v in ipairs(redis.call('SMEMBERS', P .. 'views')) do redis.call('DEL', v .. 'wb') end
local hostip = redis.call('HGETALL', P .. 'hostip')
local entries = {}
for i = 1, #hostip, 2 do
  local host, ip = hostip[i], hostip[i + 1]
  local v = redis.call('HGET', P .. 'howner', host)
  if redis.call('LLEN', P .. 'vs:' .. host) > 0 then
    local hn = tonumber(redis.call('HGET', P .. 'hnext', host) or '0')
    redis.call('ZADD', v .. 'ent:' .. ip, hn, host)
  end
  entries[v .. '\n' .. ip] = true
end
for e, _ in pairs(entries) do
  local cut = string.find(e, '\n', 1, true)
  local v, ip = string.sub(e, 1, cut - 1), string.sub(e, cut + 1)
  local top = redis.call('ZRANGE', v .. 'ent:' .. ip, 0, 0, 'WITHSCORES')
  if #top > 0 then
    local ipn = tonumber(redis.call('HGET', P .. 'inext', ip) or '0')
    redis.call('ZADD', v .. 'wb', math.max(ipn, tonumber(top[2])), ip)
  end
end
return #inflight / 2
