-- release: hand back hosts taken by acquire.lua, scheduling their next fetch.
-- ARGV: prefix P, then groups of (host, ip, host_next, ip_next); a negative time keeps the stored
-- one (nothing was sent to the host/IP).  The IP's next-fetch only ever moves forward, so several
-- fetchers (or agents) sharing an IP can never shorten its delay. The host goes back to its
-- owner's view; the IP is re-scored in every view (P views) whose entry for it is non-empty, since
-- hosts of one IP may belong to several agents.
-- Returns the remaining queue length of each host, in order.
local P = ARGV[1]
local views = redis.call('SMEMBERS', P .. 'views')
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
  if len > 0 then
    redis.call('ZADD', redis.call('HGET', P .. 'howner', host) .. 'ent:' .. ip, hn, host)
  end
  for _, v in ipairs(views) do
    local top = redis.call('ZRANGE', v .. 'ent:' .. ip, 0, 0, 'WITHSCORES')
    if #top > 0 then
      redis.call('ZADD', v .. 'wb', math.max(ipn, tonumber(top[2])), ip)
    end
  end
  out[#out + 1] = len
end
return out
