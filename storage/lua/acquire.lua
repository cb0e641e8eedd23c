-- acquire: take up to n ready hosts of one agent's workbench view, one per IP workbench entry,
-- and pop one path from each.
-- ARGV: prefix P, view prefix V, now, n.  Returns {host1, ip1, path1, left1, ..., earliest} where
-- left is how many paths the host's visit state still holds (the fetcher keeps its connection
-- only for a host it will visit again soon) and earliest is the smallest score left in the view's
-- workbench (-1 if none): when to try again.
-- A taken host and its IP are marked busy (one request in flight per host and per IP, across ALL
-- views: hbusy/ibusy are global) until release.lua; the URL is recorded in the in-flight hash
-- until the caller commits it. An IP busy for another view is just dropped from this view's
-- workbench: release.lua re-scores it in every view whose entry for the IP is non-empty.
-- A fenced view (fence.lua: its agent was declared departed) takes nothing.
local P, V = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
if redis.call('EXISTS', V .. 'fenced') == 1 then return {'-1'} end
local out = {}
local ips = redis.call('ZRANGEBYSCORE', V .. 'wb', '-inf', now, 'LIMIT', 0, n)
for _, ip in ipairs(ips) do
  redis.call('ZREM', V .. 'wb', ip)
  local ent = V .. 'ent:' .. ip
  local top = redis.call('ZRANGE', ent, 0, 0, 'WITHSCORES')
  local ipn = tonumber(redis.call('HGET', P .. 'inext', ip) or '0')
  if redis.call('SISMEMBER', P .. 'ibusy', ip) == 1 then
    -- in flight for another view; its release puts the IP back in this view's workbench
  elseif #top > 0 and tonumber(top[2]) <= now and ipn <= now then
    local host = top[1]
    redis.call('ZREM', ent, host)
    local path = redis.call('LPOP', P .. 'vs:' .. host)
    if path then
      redis.call('SADD', P .. 'ibusy', ip)
      redis.call('HSET', P .. 'hbusy', host, ip)
      redis.call('HSET', P .. 'inflight', host .. ' ' .. path, host)
      redis.call('DECR', P .. 'queued')
      local left = redis.call('LLEN', P .. 'vs:' .. host)
      if left == 0 then redis.call('SREM', V .. 'active', host) end
      out[#out + 1] = host
      out[#out + 1] = ip
      out[#out + 1] = path
      out[#out + 1] = left
    elseif redis.call('ZCARD', ent) > 0 then
      -- an empty visit state is never in an entry; if one slipped in, it is dropped here
      local t = redis.call('ZRANGE', ent, 0, 0, 'WITHSCORES')
      redis.call('ZADD', V .. 'wb', math.max(ipn, tonumber(t[2])), ip)
    end
  elseif #top > 0 then
    -- stale score (another view moved the IP's next fetch): back at its true time
    redis.call('ZADD', V .. 'wb', math.max(ipn, tonumber(top[2])), ip)
  end
end
local first = redis.call('ZRANGE', V .. 'wb', 0, 0, 'WITHSCORES')
out[#out + 1] = (#first > 0) and first[2] or '-1'
return out
