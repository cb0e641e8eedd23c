-- release: hand back hosts taken by acquire.lua, scheduling their next fetch.
-- ARGV: prefix, then groups of (host, ip, host_next, ip_next); a negative time keeps the stored
-- one (nothing was sent to the host/IP).  The IP's next-fetch only ever moves forward, so several
-- fetchers (or agents) sharing an IP can never shorten its delay.
-- Returns the remaining queue length of each host, in order.
local P = ARGV[1]
local out = {}
for i = 2, #ARGV, 4 do
  local host, ip = ARGV[i], ARGV[i + 1]
  local hn, ipn = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  assert(redis.call('HGET', P .. 'hbusy', host) == ip, 'release of a host not acquired: ' .. host)
  redis.call('HDEL', P .. 'hbusy', host)
  redis.call('SREM', P .. 'ibusy', ip)
  if hn >= 0 then
    redis.call('HSET', P .. 'hnext', host, hn)
  else
    hn = tonumber(redis.call('HGET', P .. 'hnext', host) or '0')
  end
  local old = tonumber(redis.call('HGET', P .. 'inext', ip) or '0')
  if ipn > old then
    redis.call('HSET', P .. 'inext', ip, ipn)
  else
    ipn = old
  end
  local len = redis.call('LLEN', P .. 'vs:' .. host)
  local ent = P .. 'ent:' .. ip
  if len > 0 then
    redis.call('ZADD', ent, hn, host)
  end
  local top = redis.call('ZRANGE', ent, 0, 0, 'WITHSCORES')
  if #top > 0 then
    redis.call('ZADD', P .. 'wb', math.max(ipn, tonumber(top[2])), ip)
  end
  out[#out + 1] = len
end
return out
