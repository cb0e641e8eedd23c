-- release: hand back hosts taken by acquire.lua, scheduling their next fetch.
-- ARGV: prefix P, then groups of (host, ip, host_next, ip_next, k, path_1..path_k); a negative time
-- keeps the stored one (nothing was sent to the host/IP); the k paths are put back at the front of
-- the visit state, in order, and are no longer in flight (a retry, robots.txt before a page).  The IP's next-fetch only ever moves forward, so several
-- fetchers (or agents) sharing an IP can never shorten its delay. The host goes back to its
-- owner's view; the IP is re-scored in every view (P views) whose entry for it is non-empty, since
-- hosts of one IP may belong to several agents.
-- ARGV[2]: the releasing view V, or '' (the driver): a fenced view (fence.lua) releases nothing,
-- since its hosts went to other agents, whose requests may be the ones in flight now.
-- Returns the remaining queue length of each host, in order (-1: the host was not busy).
local P, V = ARGV[1], ARGV[2]
local fenced = V ~= '' and redis.call('EXISTS', V .. 'fenced') == 1
local views = redis.call('SMEMBERS', P .. 'views')
local function release_one(host, ip, hn, ipn, back)
  redis.call('HDEL', P .. 'hbusy', host)
  redis.call('HDEL', P .. 'borrowed', host)
  local owner = redis.call('HGET', P .. 'howner', host)
  for j = #back, 1, -1 do
    redis.call('LPUSH', P .. 'vs:' .. host, back[j])
    redis.call('HDEL', P .. 'inflight', host .. ' ' .. back[j])
  end
  if #back > 0 then
    redis.call('INCRBY', P .. 'queued', #back)
    redis.call('SADD', owner .. 'active', host)
  end
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
    redis.call('ZADD', owner .. 'ent:' .. ip, hn, host)
  end
  for _, v in ipairs(views) do
    local top = redis.call('ZRANGE', v .. 'ent:' .. ip, 0, 0, 'WITHSCORES')
    if #top > 0 then
      redis.call('ZADD', v .. 'wb', math.max(ipn, tonumber(top[2])), ip)
    end
  end
  return len
end
local out = {}
local i = 3
while i <= #ARGV do
  local host, ip = ARGV[i], ARGV[i + 1]
  local hn, ipn = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local k = tonumber(ARGV[i + 4])
  local back = {}
  for j = 1, k do back[j] = ARGV[i + 4 + j] end
  i = i + 5 + k
  if fenced or redis.call('HGET', P .. 'hbusy', host) ~= ip then
    -- not acquired: a release retried after a lost reply (Redis restart) was already applied
    out[#out + 1] = -1
  else
    out[#out + 1] = release_one(host, ip, hn, ipn, back)
  end
end
return out
